"""Curation: what looks after a whole store from above the Memory facade: the export
archive and its checker, doctor, and the importers of other tools' memories."""
