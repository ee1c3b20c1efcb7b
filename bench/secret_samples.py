"""Synthetic secrets of every format the scanner knows (X2), the evasions that hide them,
and clean texts with the tricky words: shared by bench/secrets_fp.py and
tests/test_secrets_x2.py. Every value is random (a seed), built at run time: no real
secret, and none written out whole in this file."""

from __future__ import annotations

import base64
import binascii
import json
import random
import string
import urllib.parse
from collections.abc import Callable

UP, LOW, DIG = string.ascii_uppercase, string.ascii_lowercase, string.digits
ALNUM = UP + LOW + DIG
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "_-"


def formats(rng: random.Random) -> dict[str, Callable[[], str]]:
    """format name -> a maker of one realistic text holding a fresh secret of it."""

    def t(k: int, chars: str = ALNUM) -> str:
        while True:  # a random token with letters and digits both (as real ones have)
            value = "".join(rng.choice(chars) for _ in range(k))
            mixed = any(c.isdigit() for c in chars) and any(c.isalpha() for c in chars)
            if (
                not mixed
                or k < 8
                or (any(c.isdigit() for c in value) and any(c.isalpha() for c in value))
            ):
                return value

    def b64(k: int) -> str:
        return base64.b64encode(bytes(rng.randrange(256) for _ in range(k))).decode()

    def pem(label: str) -> str:
        body = "\n".join(b64(48) for _ in range(4))
        return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"

    p = "pass" + "word"  # spelled apart: this file is no .env
    return {
        "RSA private key (PEM)": lambda: pem("RSA PRIVATE" + " KEY"),
        "EC private key (PEM)": lambda: pem("EC PRIVATE" + " KEY"),
        "PKCS8 private key": lambda: pem("PRIVATE" + " KEY"),
        "encrypted private key": lambda: pem("ENCRYPTED PRIVATE" + " KEY"),
        "OpenSSH private key": lambda: pem("OPENSSH PRIVATE" + " KEY"),
        "PGP private key block": lambda: pem("PGP PRIVATE KEY" + " BLOCK"),
        "Google service-account JSON": lambda: json.dumps(
            {
                "type": "service_account",
                "private_key_id": t(40, HEX),
                "private_key": pem("PRIVATE" + " KEY") + "\n",
            }
        ),
        "AWS access key id": lambda: f"aws_access_key_id = {'AKIA' + t(16, UP + DIG)}",
        "AWS STS key id": lambda: f"export AWS_ACCESS_KEY_ID={'ASIA' + t(16, UP + DIG)}",
        "AWS secret access key": lambda: f"aws_secret_access_key = {t(40, ALNUM + '/+')}",
        "GitHub classic token": lambda: f"GITHUB_TOKEN={'gh' + 'p_' + t(36)}",
        "GitHub OAuth token": lambda: f"token {'gh' + 'o_' + t(36)} from the app",
        "GitHub app token": lambda: f"install token {'gh' + 's_' + t(36)}",
        "GitHub fine-grained token": lambda: "use github_" + "pat_" + t(22) + "_" + t(59),
        "GitLab personal token": lambda: f"gitlab: {'gl' + 'pat-' + t(20, URLSAFE)}",
        "GitLab deploy token": lambda: f"deploy with {'gl' + 'dt-' + t(20, URLSAFE)}",
        "GitLab runner token": lambda: f"runner {'gl' + 'rt-' + t(20, URLSAFE)}",
        "Slack bot token": lambda: (
            f"SLACK_BOT_TOKEN={'xo' + 'xb-'}{t(12, DIG)}-{t(12, DIG)}-{t(24)}"
        ),
        "Slack user token": lambda: f"slack {'xo' + 'xp-'}{t(12, DIG)}-{t(12, DIG)}-{t(32)}",
        "Slack webhook": lambda: (
            "https://hooks.slack.com/services/T"
            + t(8, UP + DIG)
            + "/B"
            + t(8, UP + DIG)
            + "/"
            + t(24)
        ),
        "Stripe live secret key": lambda: f"stripe.api_key = '{'sk' + '_live_' + t(24)}'",
        "Stripe restricted key": lambda: f"key {'rk' + '_live_' + t(24)}",
        "Stripe test secret key": lambda: f"STRIPE_SECRET={'sk' + '_test_' + t(24)}",
        "OpenAI legacy key": lambda: f"OPENAI_API_KEY={'s' + 'k-' + t(48)}",
        "OpenAI project key": lambda: f"key: {'s' + 'k-proj-' + t(100, URLSAFE)}",
        "Anthropic API key": lambda: f"ANTHROPIC_API_KEY={'sk-' + 'ant-api03-' + t(93, URLSAFE)}AA",
        "Google API key": lambda: f"maps key {'AI' + 'za' + t(35, URLSAFE)}",
        "Google OAuth client secret": lambda: f"client secret {'GOC' + 'SPX-' + t(28, URLSAFE)}",
        "Azure storage connection string": lambda: (
            "DefaultEndpointsProtocol=https;AccountName="
            + t(10, LOW)
            + ";AccountKey="
            + b64(64)
            + ";EndpointSuffix=core.windows.net"
        ),
        "Azure Service Bus connection string": lambda: (
            "Endpoint=sb://ns.servicebus.windows.net/;"
            "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + b64(32)
        ),
        "Azure SAS URL": lambda: (
            "https://acct.blob.core.windows.net/c/f?sv=2022-11-02&se=2030&sp=r&sig="
            + urllib.parse.quote(b64(32), safe="")
        ),
        "Azure AD client secret": lambda: (
            f"AZURE_CLIENT_SECRET={t(3)}{rng.choice(DIG)}Q~{t(34, ALNUM + '_~.-')}"
        ),
        "npm token": lambda: f"//registry.npmjs.org/:_authToken={'np' + 'm_' + t(36)}",
        "PyPI token": lambda: f"{p} = {'py' + 'pi-AgEIcHlwaS5vcmc' + t(70, URLSAFE)}",
        "Hugging Face token": lambda: f"HF_TOKEN={'h' + 'f_' + t(34, UP + LOW)}",
        "Twilio API key": lambda: f"twilio key {'S' + 'K' + t(32, HEX)}",
        "Twilio auth token": lambda: f"TWILIO_AUTH_TOKEN={t(32, HEX)}",
        "SendGrid API key": lambda: f"sendgrid {'S' + 'G.' + t(22, URLSAFE)}.{t(43, URLSAFE)}",
        "Mailgun API key": lambda: f"mailgun {'ke' + 'y-' + t(32, HEX)}",
        "Discord bot token": lambda: (
            f"bot {rng.choice('MNO')}{t(25, URLSAFE)}.{t(6, URLSAFE)}.{t(38, URLSAFE)}"
        ),
        "Telegram bot token": lambda: f"TELEGRAM_TOKEN={t(10, DIG)}:AA{t(33, URLSAFE)}",
        "Shopify access token": lambda: f"shopify {'shp' + 'at_' + t(32, HEX)}",
        "DigitalOcean token": lambda: f"DO token {'do' + 'p_v1_' + t(64, HEX)}",
        "Heroku API key": lambda: (
            f"HEROKU_API_KEY={t(8, HEX)}-{t(4, HEX)}-{t(4, HEX)}-{t(4, HEX)}-{t(12, HEX)}"
        ),
        "JSON Web Token": lambda: (
            "Cookie: session="
            + base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
            + "."
            + base64.urlsafe_b64encode(json.dumps({"sub": t(10)}).encode()).decode().rstrip("=")
            + "."
            + t(43, URLSAFE)
        ),
        "password in a database URL": lambda: (
            f"DATABASE_URL=postgres://app:{t(16)}@db.internal:5432/app"
        ),
        "password in an https URL": lambda: f"clone https://bot:{t(20)}@git.example.net/repo.git",
        "Authorization Bearer header": lambda: f"Authorization: Bearer {t(40, URLSAFE)}",
        "Authorization Basic header": lambda: (
            "Authorization: Basic " + base64.b64encode(f"admin:{t(12)}".encode()).decode()
        ),
        ".env block": lambda: f"APP_ENV=prod\nDB_HOST=db\nDB_{p.upper()}={t(14)}\nDEBUG=false",
        "DB_PASSWORD assignment": lambda: f"DB_{p.upper()}={t(12)}!",
        "JSON password field": lambda: json.dumps({"user": "svc", p: t(14) + "#1"}),
        "YAML secret field": lambda: f"auth:\n  client_secret: {t(32)}\n",
        "generic API key assignment": lambda: f'api_key = "{t(32)}"',
        "access token assignment": lambda: f"access_token: {t(40, URLSAFE)}",
        "netrc password": lambda: f"machine api.example.com login bot {p} {t(16)}",
        "command-line password flag": lambda: f"mysql -u root --{p}={t(12)} app",
        "HashiCorp Vault token": lambda: f"VAULT_TOKEN={'hv' + 's.' + t(90, URLSAFE)}",
        "Databricks token": lambda: f"databricks {'dap' + 'i' + t(32, HEX)}",
        "Docker Hub token": lambda: f"docker login -p {'dckr' + '_pat_' + t(27, URLSAFE)}",
        "Grafana service token": lambda: f"grafana {'gl' + 'sa_' + t(32)}_{t(8, HEX)}",
        "Postman API key": lambda: f"postman {'PM' + 'AK-' + t(24, HEX)}-{t(34, HEX)}",
        "Groq API key": lambda: f"GROQ_API_KEY={'gs' + 'k_' + t(52)}",
        "Atlassian API token": lambda: f"jira {'ATA' + 'TT3' + t(180, URLSAFE)}",
        "Azure SQL connection string": lambda: (
            "Server=tcp:db.database.windows.net;Database=app;"
            f"User ID=admin;{p.title()}={t(14)}!;Encrypt=true"
        ),
        "curl basic auth": lambda: f"curl -u deploy:{t(14)} https://ci.example.com/api",
        "password in prose": lambda: f"The wifi {p} is {t(10)}#{t(3, DIG)} for guests",
        "token in prose": lambda: f"the API token is {t(40)} for now",
        "Kubernetes secret data": lambda: f"data:\n  {p}: {b64(18)}\n",
    }


def evasions() -> dict[str, Callable[[str], str]]:
    """evasion kind -> how it hides a secret (a bare token) in a text."""

    def split(s: str) -> str:
        return f"key part one {s[:10]}\n{s[10:]} (joined)"

    def fullwidth(s: str) -> str:
        return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s)

    return {
        "split across lines": split,
        "backslash continuation": lambda s: f'KEY="{s[:10]}\\\n    {s[10:]}"',
        "string concatenation": lambda s: f'key = "{s[:8]}" "{s[8:20]}" + "{s[20:]}"',
        "base64": lambda s: "blob " + base64.b64encode(f"token={s}".encode()).decode(),
        "base64url": lambda s: "blob " + base64.urlsafe_b64encode(s.encode()).decode().rstrip("="),
        "hex": lambda s: "bytes " + binascii.hexlify(s.encode()).decode(),
        "URL-encoding": lambda s: "q=" + "".join(f"%{b:02X}" for b in s.encode()),
        "JSON unicode escapes": lambda s: '{"k": "' + "".join(f"\\u{ord(c):04x}" for c in s) + '"}',
        "HTML entities": lambda s: "".join(f"&#{ord(c)};" for c in s),
        "zero-width characters": lambda s: "\u200b".join(s[i : i + 4] for i in range(0, len(s), 4)),
        "soft hyphens and joiners": lambda s: "\u00ad".join(s[:8]) + "\u2060" + s[8:],
        "full-width forms": fullwidth,
        "Cyrillic look-alikes": lambda s: (
            s.replace("A", "\u0410").replace("o", "\u043e").replace("p", "\u0440")
        ),
        "spaced out": lambda s: " ".join(s),
        "Unicode dashes": lambda s: s.replace("-", "\u2013").replace("_", "\uff3f"),
        "double URL-encoding": lambda s: "q=" + "".join(f"%25{b:02X}" for b in s.encode()),
        "mathematical letters": lambda s: "".join(
            chr(0x1D400 + ord(c) - 65) if "A" <= c <= "Z" else c for c in s
        ),
    }


def evasion_targets(rng: random.Random) -> dict[str, str]:
    """Bare secrets of a few formats, for the evasions to hide."""

    def t(k: int, chars: str = ALNUM) -> str:
        return "".join(rng.choice(chars) for _ in range(k - 2)) + rng.choice(DIG) + rng.choice(LOW)

    return {
        "AWS access key id": "AK" + "IA" + t(16, UP + DIG)[:-1] + rng.choice(DIG),
        "GitHub token": "gh" + "p_" + t(36),
        "Stripe key": "sk" + "_live_" + t(24),
        "Slack token": "xo" + "xb-" + t(12, DIG)[:-1] + "1-" + t(24),
        "Anthropic key": "sk-" + "ant-api03-" + t(60),
    }


CLEAN = [
    "PWD=/home/ada/projects/memdir",
    "OLDPWD=/tmp and PWD=/srv/app in the shell's environment",
    "Please change your password after the first login.",
    "The docs say: never share your password or your API key with anyone.",
    "password: ********",
    "DB_PASSWORD=<your-password>",
    "API_KEY=${API_KEY}",
    "api_key = os.environ['OPENAI_API_KEY']",
    "token = os.getenv('GITHUB_TOKEN')",
    "secret: changeme",
    "password = xxxxxxxx",
    "sk-learn is what people mistype for scikit-learn",
    "pip install scikit-learn; import sklearn",
    "request id 123e4567-e89b-12d3-a456-426614174000 failed",
    "Commit 3f2a9c1d4b5e6f708192a3b4c5d6e7f8a9b0c1d2 fixed the bug",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    '"integrity": "sha512-' + "Zm9vYmFyYmF6cXV4" * 5 + '=="',
    "max_tokens=1024 and token_count: 4000",
    "the password field is required; passwords must be 12 characters",
    "def login(user, password): return check(user, password)",
    "password_hash = bcrypt.hashpw(password, salt)",
    'headers = {"Authorization": f"Bearer {token}"}',
    'curl -H "Authorization: Bearer $TOKEN" https://api.example.com',
    "client_secret: settings.CLIENT_SECRET",
    "Connect with postgres://user:password@localhost/db in the docs example.",
    'The JWT header starts with eyJ, which is base64 for {"',
    "ssh-keygen -t ed25519 makes a key pair; the public key goes to GitHub",
    "2024-05-01 12:00:03 INFO auth: token refreshed for user 42 (expires in 3600 s)",
    "WARN login failed: bad password for user alice from 10.0.0.7",
    "![logo](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
    "The secret to good bread is time.",
    "Her passcode hint was her dog's name.",
    "key = hashlib.sha1(data).hexdigest()",
    "cache_key: user-profile-42",
    "public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9v ada@h",
    "export PATH=/usr/local/bin:$PATH",
    "TOKEN_URL=https://oauth2.googleapis.com/token",
    "password_file: /run/secrets/db_password",
    "The sig= parameter of a SAS URL is its signature; keep it out of logs.",
    "Set AUTH_METHOD=oauth and SESSION_SECRET_LENGTH=64",
    "password: !vault |",
    "password: ${{ secrets.DB_PASSWORD }}",
    "AWS_SECRET_ACCESS_KEY: !Ref SecretKey",
    "The key is to keep commits small; the token is stored in the keychain.",
    "my key: ~/.ssh/id_ed25519 and PASSWORD_MIN_LENGTH=12",
]
