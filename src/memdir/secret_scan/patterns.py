"""The shapes of secrets (X2): the token formats the providers document (as gitleaks and
detect-secrets list them), private keys, credentials in URLs and headers, and the generic
rule for a credential-named assignment (`DB_PASSWORD=...`, `"api_key": "..."`,
`token: ...`) whose value looks like a credential, not a placeholder, path or prose."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import NamedTuple


class Lazy:
    """A regex compiled on its first use: the CLI imports the scanner on every write, and
    most texts need few of its patterns."""

    __slots__ = ("_compiled", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self._compiled: re.Pattern[str] | None = None

    @property
    def regex(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.source)
        return self._compiled

    def match(self, text: str) -> re.Match[str] | None:
        return self.regex.match(text)

    def search(self, text: str) -> re.Match[str] | None:
        return self.regex.search(text)

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self.regex.fullmatch(text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.regex.finditer(text)


class Shape(NamedTuple):
    kind: str  # what the refusal calls it: "a GitHub token"
    pattern: str  # group 1, when there is one, is the secret itself
    needles: tuple[str, ...]  # lower-case substrings it cannot match without
    check: str = ""  # "": the format alone; else a value test in VALUE_TESTS
    # The shortest unbroken run (no whitespace) every match holds, 0 when a match may span
    # whitespace: a needle as common as "." then rules out prose by its word lengths alone.
    min_run: int = 0


B = r"(?<![A-Za-z0-9_])"  # no word character before (\b that treats _ as a letter too)
E = r"(?![A-Za-z0-9_])"
U = r"(?![A-Za-z0-9_-])"

SHAPES: tuple[Shape, ...] = (
    Shape(
        "a private key",
        # the header and a body: a header alone (a constant in a parser) holds no key
        r"-{3,}\s*BEGIN[A-Z0-9 \t]{0,40}PRIVATE\s*KEY(?:\s*BLOCK)?\s*-{3,}\s*"
        r"(?:[A-Za-z-]+:[^\n]*\n\s*)*[A-Za-z0-9+/=]{16}",
        ("private",),
    ),
    Shape("a PuTTY private key", r"PuTTY-User-Key-File-\d+:", ("putty-user-key",)),
    Shape("an age secret key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}", ("age-secret-key-",)),
    Shape(
        "an AWS access key id",
        B + r"((?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[0-9A-Z]{16})" + E,
        ("akia", "asia", "abia", "acca", "agpa", "aida", "aroa", "aipa", "anpa", "anva", "apka"),
    ),
    Shape(
        "an AWS secret access key",
        r"(?i)aws.{0,30}?(?:secret|sk|key).{0,20}?[=:]\s*[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        ("aws",),
        "token",
    ),
    Shape(
        "a GitHub token",
        B + r"(gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})" + E,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Shape(
        "a GitLab token",
        B
        + r"((?:glpat|gldt|glrt|glptt|glcbt|glimt|glagent|gloas|glft|glsoat|glffct)-"
        + r"[A-Za-z0-9_-]{20,}|GR1348941[A-Za-z0-9_-]{20,})",
        (
            "glpat-",
            "gldt-",
            "glrt-",
            "glptt-",
            "glcbt-",
            "glimt-",
            "glagent-",
            "gloas-",
            "glft-",
            "glsoat-",
            "glffct-",
            "gr1348941",
        ),
    ),
    Shape("a Slack token", B + r"(xox[abposre]-[A-Za-z0-9-]{10,})", ("xox",), "token"),
    Shape("a Slack app token", B + r"(xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+)", ("xapp-",)),
    Shape(
        "a Slack webhook",
        r"(hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,})",
        ("hooks.slack.com",),
    ),
    Shape(
        "a Discord webhook",
        r"(discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,})",
        ("/api/webhooks/",),
    ),
    Shape(
        "an Anthropic API key",
        B + r"(sk-ant-(?:api|admin|oat|sid)?\d*-?[A-Za-z0-9_-]{20,})",
        ("sk-ant-",),
    ),
    Shape(
        "an OpenAI API key",
        B + r"(sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,})",
        ("sk-",),
        "keyrun",
    ),
    Shape("a Google API key", B + r"(AIza[0-9A-Za-z_-]{35})", ("aiza",)),
    Shape("a Google OAuth client secret", B + r"(GOCSPX-[A-Za-z0-9_-]{20,})", ("gocspx-",)),
    Shape("a Google OAuth token", B + r"(ya29\.[0-9A-Za-z_-]{20,})", ("ya29.",)),
    Shape(
        "a Stripe secret key",
        B + r"((?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{16,})",
        ("sk_live_", "rk_live_", "sk_test_", "rk_test_"),
    ),
    Shape("a Stripe webhook secret", B + r"(whsec_[A-Za-z0-9+/]{24,})", ("whsec_",)),
    Shape(
        "an Azure storage account key",
        r"(?i)(?:AccountKey|SharedAccessKey|PrimaryKey|SecondaryKey)\s*=\s*([A-Za-z0-9+/]{20,}={0,2})",
        ("accountkey", "sharedaccesskey", "primarykey", "secondarykey"),
        "varied",
    ),
    Shape(
        "an Azure SAS signature",
        r"[?&;]sig=([A-Za-z0-9%+/]{20,}(?:%3D|=){0,2})",
        ("sig=",),
        "token",
    ),
    Shape(
        "an Azure client secret",
        B + r"([A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34})" + E,
        ("q~",),
    ),
    Shape("an npm token", B + r"(npm_[A-Za-z0-9]{36})" + E, ("npm_",)),
    Shape("a PyPI token", B + r"(pypi-Ag[A-Za-z0-9_-]{50,})", ("pypi-ag",)),
    Shape(
        "a Hugging Face token",
        B + r"((?:hf_|api_org_)[A-Za-z0-9]{30,})" + E,
        ("hf_", "api_org_"),
        "varied",
    ),
    Shape("a Twilio API key", B + r"(SK[0-9a-fA-F]{32})" + E, ("sk",), "hexmix"),
    Shape(
        "a SendGrid API key",
        B + r"(SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64})",
        ("sg.",),
    ),
    Shape(
        "a Mailgun API key",
        B + r"(key-[0-9a-zA-Z]{32}|[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8})" + E,
        ("key-", "-"),
        "token",
    ),
    Shape("a Mailchimp API key", B + r"([0-9a-f]{32}-us\d{1,2})" + E, ("-us",), "hexmix"),
    Shape(
        "a Discord bot token",
        B + r"([MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40})" + U,
        (".",),
        "token",
        1 + 23 + 1 + 6 + 1 + 27,  # every character a token character: one word of 59+
    ),
    Shape("a Telegram bot token", B + r"(\d{8,10}:AA[0-9A-Za-z_-]{33})" + U, (":aa",)),
    Shape(
        "a Shopify token",
        B + r"(shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32})" + E,
        ("shpat_", "shpca_", "shppa_", "shpss_"),
    ),
    Shape(
        "a DigitalOcean token",
        B + r"(do[por]_v1_[a-f0-9]{64})" + E,
        ("dop_v1_", "doo_v1_", "dor_v1_"),
    ),
    Shape("a Heroku API key", B + r"(HRKU-[A-Za-z0-9_-]{20,})", ("hrku-",)),
    Shape(
        "a Heroku API key",
        r"(?i)heroku\w{0,20}[\"']?\s*[=:]\s*[\"']?"
        r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})",
        ("heroku",),
    ),
    Shape("a Databricks token", B + r"(dapi[a-f0-9]{32})(?:-\d)?" + E, ("dapi",), "hexmix"),
    Shape(
        "a Square token",
        B + r"(sq0(?:atp|csp|idp)-[0-9A-Za-z_-]{22,43}|EAAA[A-Za-z0-9_-]{60})",
        ("sq0atp-", "sq0csp-", "sq0idp-", "eaaa"),
    ),
    Shape("a Facebook access token", B + r"(EAA[A-Za-z0-9]{90,})", ("eaa",)),
    Shape("a Postman API key", B + r"(PMAK-[a-f0-9]{24}-[a-f0-9]{34})", ("pmak-",)),
    Shape("a Doppler token", B + r"(dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,})", ("dp.",)),
    Shape("a Pulumi token", B + r"(pul-[a-f0-9]{40})" + E, ("pul-",)),
    Shape(
        "a Terraform Cloud token",
        r"([A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,})",
        (".atlasv1.",),
    ),
    Shape(
        "a HashiCorp Vault token", B + r"(hv[sbr]\.[A-Za-z0-9_-]{24,})", ("hvs.", "hvb.", "hvr.")
    ),
    Shape(
        "a Grafana token",
        B + r"(glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[a-fA-F0-9]{8})",
        ("glc_", "glsa_"),
    ),
    Shape(
        "a New Relic key",
        B + r"(NR(?:AK|II|JS)-[A-Za-z0-9]{27,32})" + E,
        ("nrak-", "nrii-", "nrjs-"),
    ),
    Shape("a Sentry token", B + r"(sntr[ysu]_[A-Za-z0-9+/=_]{40,})", ("sntrys_", "sntryu_")),
    Shape("a Linear API key", B + r"(lin_api_[A-Za-z0-9]{40})" + E, ("lin_api_",)),
    Shape(
        "a Notion token",
        B + r"(secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,})" + E,
        ("secret_", "ntn_"),
        "token",
    ),
    Shape("a Replicate token", B + r"(r8_[A-Za-z0-9]{37})" + E, ("r8_",)),
    Shape("a Groq API key", B + r"(gsk_[A-Za-z0-9]{48,})" + E, ("gsk_",)),
    Shape("an xAI API key", B + r"(xai-[A-Za-z0-9]{70,})" + E, ("xai-",)),
    Shape("a Perplexity API key", B + r"(pplx-[A-Za-z0-9]{40,})" + E, ("pplx-",)),
    Shape("a Figma token", B + r"(figd_[A-Za-z0-9_-]{40,})", ("figd_",)),
    Shape("a Supabase token", B + r"(sbp_[a-f0-9]{40})" + E, ("sbp_",)),
    Shape(
        "a PlanetScale token",
        B + r"(pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,64})",
        ("pscale_",),
    ),
    Shape("a Docker Hub token", B + r"(dckr_pat_[A-Za-z0-9_-]{27,})", ("dckr_pat_",)),
    Shape("an Alibaba Cloud key", B + r"(LTAI[A-Za-z0-9]{12,20})" + E, ("ltai",), "token"),
    Shape("an Adafruit IO key", B + r"(aio_[A-Za-z0-9]{28})" + E, ("aio_",)),
    Shape(
        "a Mapbox secret token", B + r"(sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,})", ("sk.eyj",)
    ),
    Shape(
        "a Firebase Cloud Messaging key",
        B + r"(AAAA[A-Za-z0-9_-]{7}:[A-Za-z0-9_-]{140})",
        ("aaaa",),
    ),
    Shape(
        "a JSON Web Token",
        B + r"(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
        ("eyj",),
    ),
    Shape(
        "a password in a URL",
        r"[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s/:@\"'<>]{0,128}:([^\s/@\"'<>]{1,256})@[^\s/@]",
        ("://",),
        "password",
    ),
    Shape(
        "a password in a .netrc",
        r"(?i)\bmachine\s+\S+\s+login\s+\S+\s+password\s+(\S+)",
        ("machine",),
        "password",
    ),
    Shape(
        "a password in prose",
        r"(?i)\b(?:password|passwd|passphrase|passcode)\s+(?:is|was)\s+[\"'`]?([^\s\"'`]{6,128})",
        ("pass",),
        "spoken",
    ),
    Shape(
        "a token in prose",
        r"(?i)\b(?:secret|token|api[ _-]?key|access[ _-]?key|secret[ _-]?key)\s+(?:is|was)\s+"
        r"[\"'`]?([A-Za-z0-9_+/=.~-]{16,256})",
        ("secret", "token", "key"),
        "token",
    ),
    Shape(
        "an Atlassian API token",
        B + r"(ATATT3[A-Za-z0-9_=-]{60,}|ATBB[A-Za-z0-9_=.-]{28,})",
        ("atatt3", "atbb"),
    ),
    Shape(
        "a password on a command line",
        r"(?<!\S)(?:-u|--user)[ \t=]+[^\s:'\"]{1,64}:([^\s'\"@]{6,128})(?=\s|$|['\"])",
        ("-u", "--user"),
        "password",
    ),
    Shape(
        "an Authorization header",
        r"(?i)\b(?:authorization|proxy-authorization)[\"']?\s*[:=]\s*[\"']?"
        r"(?:bearer|basic|token|bot|digest|apikey|sso-key)\s+([A-Za-z0-9._~+/:=-]{8,})",
        ("authorization",),
        "header",
    ),
    Shape(
        "a bearer token",
        r"(?i)\bbearer\s+([A-Za-z0-9._~+/-]{20,}=*)",
        ("bearer",),
        "token",
    ),
)

# The words of a name that says its value is a secret (split at _ - . and camelCase).
SECRET_WORDS = frozenset(
    "password passwd passphrase pwd pw pass secret secrets token tokens credential "
    "credentials creds apikey authkey auth privkey pat".split()
)
KEY_QUALIFIERS = frozenset(  # "<one of these> key" names a secret key
    "api access private secret client signing encryption encrypt master account shared "
    "app application session license licence service consumer webhook aws deploy "
    "admin root storage subscription primary_access auth hmac jwt crypto cipher aes "
    "stripe openai anthropic github gitlab slack twilio sendgrid mailgun".split()
)
NOT_SECRET_WORDS = frozenset(  # ... unless the name also says it is about something else
    "file path dir url uri endpoint host name id type length len size count max min "
    "limit prompt env var field header policy hash hashed hasher rotation expiry expires "
    "expiration ttl format regex pattern hint label description prefix public pub "
    "required length budget usage used input output".split()
)

ASSIGNMENT = Lazy(
    r"(?<![A-Za-z0-9_.-])([A-Za-z_][A-Za-z0-9_.-]{0,62}[A-Za-z0-9])[\"'\]]?[ \t]*"
    r"(?::=|=>|=|:)[ \t]*"
    r"(?=\"([^\"\n]{1,300})\"|'([^'\n]{1,300})'|([^\s\"'`,;&|<>]{1,300}))"
)
FLAG = Lazy(
    r"(?i)(?<![\w-])--?((?:db-|api-|auth-|access-|client-)?"
    r"(?:password|passwd|token|secret|api-key|apikey|client-secret|access-key|auth-token))"
    r"(?:=|[ \t]+)[\"']?([^\s\"'`,;&|<>]{4,300})"
)
ASSIGNMENT_NEEDLES = ("pass", "pwd", "pw", "secret", "token", "key", "auth", "cred", "sig", "pat")

PLACEHOLDER = Lazy(  # the whole value is one of these: a placeholder whatever else it is
    r"(?i)^(?:<[^>]*>|\[[^\]]*\]|\$\{?[\w.:-]+\}?|\$\(.*\)|%\(?\w+\)?s?|%\w+%|\{\{?[^}]*\}\}?"
    r"|[*•·●]+|[x]+|[.]+|[-]+|[_]+|[#]+|[?]+|0+|1234\d*|"
    r"null|none|nil|nan|undefined|true|false|yes|no|on|off|empty|redacted|removed|hidden|"
    r"masked|secret|password|passwd|token|changeme|change[_-]?me|replace[_-]?me|"
    r"test|testing|default|todo|tbd|fixme|required|optional|string|str|"
    r"int|bool|text|bytes|any|value|.*\.\.\.|.*…)$"
)
# A placeholder by its first or last words (`your_api_key`, `my-token`, `token_here`,
# `example_key`, `sk_live_xxxx`): only when the value is words as a whole (`wordy`), as a
# random credential that happens to start "my" or hold "xXxX" is not.
PLACEHOLDER_WORDS = Lazy(
    r"(?i)^(?:your[\w.-]+|my[\w.-]+|[\w.-]*[_-]here|(?:example|sample|dummy|fake|placeholder)"
    r"[\w.-]*|xxx+[\w.-]*|[\w.-]*x{4,}[\w.-]*|[\w.-]*\*{3,}[\w.-]*)$"
)
# What a value may say of itself that makes it an example, not a credential.
EXAMPLE = Lazy(  # "your" as a word and x-runs of one case: not letters a random value holds
    r"(?<![A-Za-z0-9])(?:your|Your|YOUR)|(?i:example|placeholder|dummy|changeme|change[_-]me|"
    r"replace[_-]?me|redacted|insert|fill[_-]?in)|xxxx|XXXX|\*{3}|<[^>]*>|\.\.\.|…"
)
CODE = Lazy(  # an identifier, a reference, a call or a lookup: code, not a value
    r"(?:[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+|[A-Za-z_]\w*\(.*|[A-Za-z_]\w*\[.*|"
    r"_*[a-z]+|_*[A-Z]+|_*[a-z][a-z0-9]*(?:_+[a-z0-9]+)+|_*[A-Z][A-Z0-9]*(?:_+[A-Z0-9]+)+)"
)
IDENTIFIER = Lazy(  # mixed case: code only when its pieces are words (`wordy`)
    r"_*[A-Za-z]+|_*[a-z]+(?:[A-Z][a-z]+|[A-Z]{2,5}[0-9]?)+|"  # camelCase: challengePassword
    r"(?:[A-Z]{1,6}[0-9]?|[A-Z][a-z]{2,})+"  # PascalCase: PKCS7PrivateKeyTypes
)
PATH = Lazy(r"(?:~?/|\.\.?/|[A-Za-z]:\\|\\\\)[^\s]*")


def entropy(value: str) -> float:
    if not value:
        return 0.0
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    size = len(value)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


_FILLER = Lazy(r"x{4,}|X{4,}|\*{3,}|\.{3,}|…")  # what stands for the elided part
_PIECE = Lazy(r"[A-Z]{2,}(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[A-Z]")  # camelCase cut in words
_CONSONANTS = Lazy(r"[b-df-hj-np-tv-xz]{5}")  # five consonants in a row: no English word


def wordy(value: str) -> bool:
    """Whether `value` reads as words (`my_api_key`, `YourTokenHere`, `MY_SECRET`,
    `sk_live_xxxx`, `token2`), not as random characters: few digits, camelCase pieces
    long enough to be words, vowels in them. A random credential of 24 characters or
    more fails it on one count or another all but ~1 in 1,000 times, and it is asked only
    of a value already shaped like a placeholder or an identifier (starting "my", say),
    so together a random credential is taken for one far less often than that."""
    letters: list[str] = []
    numbers = 0
    for part in re.split(r"[^A-Za-z0-9]+", _FILLER.regex.sub(" ", value)):
        if not part:
            continue
        pieces = _PIECE.regex.findall(part)
        digits = [p for p in pieces if p.isdigit()]
        numbers += len(digits)
        if len(digits) > 1 or numbers > 2 or any(len(d) > 4 for d in digits):
            return False  # digits inside a word, or a long number: random
        words = [p for p in pieces if not p.isdigit()]
        letters += words
        if part == part.upper() or part == part.lower():
            continue  # one word (MY_SECRET, my_db_pw): the separators cut it
        if sum(1 for w in words if len(w) >= 2 and w.isupper()) > 2:
            return False  # camelCase with many capital runs: random letters
        if len(part) >= 12 and sum(map(len, words)) < 3 * len(words):
            return False  # a long camelCase of pieces shorter than words
        if sum(1 for w in words if len(w) == 1) > 1:
            return False
        short = sum(1 for w in words if len(w) <= 2)
        if short > 2 and 3 * short > len(words):
            return False
    if not letters:
        return False
    bare = 0
    for word in letters:
        low = word.lower()
        if _CONSONANTS.search(low):
            return False
        if len(word) >= 3 and not (word.isupper() and len(word) <= 5):  # HTTP, PKCS: fine
            bare += not any(c in "aeiouy" for c in low)
    return bare <= 1


def placeholder_form(value: str) -> bool:
    """The value as a whole is a placeholder (`<token>`, `changeme`, `your-api-key`)."""
    if PLACEHOLDER.match(value):
        return True
    return bool(PLACEHOLDER_WORDS.match(value)) and wordy(value)


def placeholder(value: str) -> bool:
    return placeholder_form(value) or EXAMPLE.search(value) is not None


def code_like(value: str) -> bool:
    """An identifier, a reference or a call: code, not a value (camelCase only when its
    pieces are words: a random token can spell a camelCase shape)."""
    if CODE.fullmatch(value):
        return True
    return bool(IDENTIFIER.fullmatch(value)) and wordy(value)


_PRINTF = Lazy(r"%[sdr](?![0-9A-Fa-f])")  # not %d3: a URL escape
_BASE64_VALUE = Lazy(r"[A-Za-z0-9+/]{16,}={0,2}")


def path_like(value: str) -> bool:
    """A file path (`/run/secrets/db_password`), not a base64 value that starts with `/`
    (a Kubernetes secret's data): a path's parts are mostly words."""
    if not PATH.fullmatch(value):
        return False
    if not _BASE64_VALUE.fullmatch(value) or value.isupper() or value.islower():
        return True
    if "+" in value or value.endswith("="):
        return False  # base64's other symbols, in a mixed-case value: not a path
    parts = [p for p in re.split(r"[/\\]", value) if p]
    random_chars = sum(len(p) for p in parts if len(p) >= 4 and not _path_word(p))
    return 2 * random_chars < len(value)


def _path_word(part: str) -> bool:
    """A path's part: words (`Projects`, `db_password`), or one case (`tmpa8f3kz9q`)."""
    if part.isupper() or part.islower():
        return True
    return wordy(part) and not any(c.isdigit() for c in part)


def random_enough(value: str) -> bool:
    """Entropy a random credential of this length and alphabet reaches: a hex value has
    at most 4 bits a character and a short one less (a random 32-character hex token is
    under 3.3 bits in ~1.7% of draws), so the bar falls with both."""
    n = len(value)
    if all(c in "0123456789abcdef" for c in value) or all(c in "0123456789ABCDEF" for c in value):
        bar = min(2.7, 2.2 + 0.03 * (n - 16))  # below a random hex value's 0.01% quantile
    else:
        bar = min(3.3, 2.8 + 0.1 * (n - 16))
    return entropy(value) >= bar


def tokenish(value: str) -> bool:
    """A random-looking credential: long enough, letters and digits, varied characters."""
    core = value.strip("=")
    if len(core) < 16 or placeholder_form(core):  # "EXAMPLE" inside: still the format
        return False
    if not any(c.isdigit() for c in core) or not any(c.isalpha() for c in core):
        return False
    return entropy(core) >= 3.0


def varied(value: str) -> bool:
    """Random-looking without needing digits (a Hugging Face token is letters only)."""
    core = value.strip("=")
    return len(core) >= 16 and not placeholder_form(core) and len(set(core)) >= 6


def keyrun(value: str) -> bool:
    """An API key's body: random, with a long unbroken run (not a slug of words)."""
    body = value.split("-", 1)[1] if "-" in value else value
    longest = max(len(run) for run in re.split(r"[-_]", body))
    return tokenish(body) and longest >= 16


def spoken(value: str) -> bool:
    """A password given in prose ("the password is ..."): not a word, it has a digit or
    a symbol next to letters."""
    value = value.rstrip(".,;:!?)")
    if placeholder(value) or value.isalpha() or code_like(value):
        return False
    return len(value) >= 6 and any(c.isalpha() for c in value)


def hexmix(value: str) -> bool:
    """A hex body that is not all digits or all letters (not a run of one character)."""
    body = value[-32:]
    return any(c.isdigit() for c in body) and any(c.isalpha() for c in body) and random_enough(body)


def password_like(value: str) -> bool:
    """A password: not a placeholder, a reference or a path, and not a plain word."""
    if len(value) < 6 or placeholder(value) or path_like(value):
        return False
    if value.startswith(("$", "%", "{", "<", "@", "#", "!")) or any(c in value for c in "()[]{}"):
        return False  # a variable, a template, a YAML tag (!vault), a call, a lookup
    if "%" in value and any(c.isspace() for c in _percent_decoded(value)):
        return False  # words in a URL's example: a%20secret
    if value.isalpha() and value.lower() == value and len(value) < 12:
        return False  # a word: "password: required", "pwd: changed"
    return not (code_like(value) and not any(c.isdigit() for c in value))


def _percent_decoded(value: str) -> str:
    return re.sub(r"%([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), value)


def header_value(value: str) -> bool:
    return tokenish(value) or (len(value) >= 12 and ":" in _b64(value))


def _b64(value: str) -> str:
    import binascii

    try:
        return binascii.a2b_base64(value + "=" * (-len(value) % 4)).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


VALUE_TESTS = {
    "keyrun": keyrun,
    "spoken": spoken,
    "token": tokenish,
    "varied": varied,
    "hexmix": hexmix,
    "password": password_like,
    "header": header_value,
}


def name_words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def secret_name(name: str) -> str | None:
    """'password' or 'secret' when the name says its value is one, else None."""
    words = name_words(name)
    if not words or any(w in NOT_SECRET_WORDS for w in words):
        return None
    for i, word in enumerate(words):
        if word in ("password", "passwd", "passphrase", "pwd", "pw", "pass"):
            return "password"
        if word in SECRET_WORDS:
            return "secret"
        if word in ("key", "keys") and i > 0 and words[i - 1] in KEY_QUALIFIERS:
            return "secret"
        if word.endswith(("password", "passwd")) or word in (
            "apikey",
            "secretkey",
            "accesskey",
            "privatekey",
            "authtoken",
            "accesstoken",
            "clientsecret",
        ):
            return "secret" if not word.endswith(("password", "passwd")) else "password"
    return None


def credential_value(what: str, value: str) -> bool:
    """Whether the value of a `what` ('password' or 'secret') name is a credential."""
    value = value.strip()
    if value.endswith(("...", "…")) or value.startswith(("pk_live_", "pk_test_")):
        return False  # elided (an example), or a Stripe publishable key (public)
    value = value.rstrip(".)]},:")
    if not value or " " in value or "\t" in value or path_like(value):
        return False
    if what == "password":
        return password_like(value)
    if placeholder(value) or any(ch in value for ch in "()[]{}$<>`"):
        return False
    if "%" in value and _PRINTF.search(value):
        return False  # a format string: "__attr_factory_%s"
    if code_like(value):
        return False  # settings.API_KEY, config.token, forward_hf_token
    return len(value) >= 16 and random_enough(value) and not value.isalpha()
