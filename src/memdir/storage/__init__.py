"""Mechanism only: rows, indexes, files and locks. No caps, budgets or categories here."""
