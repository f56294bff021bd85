"""One redaction for every secret a user can hand rlft: saved settings, run records, reports, URLs, pipeline banners
and error lines all pass through here, so a token typed once is written nowhere.

A secret is the value of a key or option whose name says so (token, api key, password, secret, credential,
authorization), the password part of a URL (``https://user:TOKEN@host``), a URL query parameter or an environment
assignment (``HF_TOKEN=...``) of such a name, and a value shaped like a Hugging Face, OpenAI or GitHub token.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rlft.core.errors import InvalidInputError

MASK = "***"
# by name: a token of a service (never a tokenizer's pad_token or max_new_tokens), keys, passwords and the like
_SECRET_NAME = re.compile(r"^(?:token|(?!.*(?:^|_)(?:pad|eos|bos|unk|sep|cls|mask|per)_token$).*_token)$"
                          r"|^(?:.*_)?token_?value$|api_?key|passw(?:or)?d|passphrase|secret|credential|authorization"
                          r"|(?:^|_)(?:private|access|wandb|ssh|signing|encryption|master|account|storage|license"
                          r"|subscription|client|auth)_?key$|(?:^|_)auth$")
# an option whose bare name is a credential on a command line ("--key V", "--pass V"); not as a key of a mapping,
# where rlft's own records use "key" for a column's name
_SECRET_OPTION = re.compile(r"^(?:key|pass|sig|pw|pwd|pat|creds?)$")
# an environment variable (upper case, as a shell line writes it) names a secret by its suffix too: OPENAI_KEY,
# WANDB_KEY, AWS_SECRET_ACCESS_KEY, a personal access token (GH_PAT)
_SECRET_ENV = re.compile(r"(?:(?:^|_)(?:KEY|PAT|PASS)|_PWD|TOKEN)$")  # MYTOKEN too: an upper-case name ending so
# an HTTP credential as a header or a curl line writes it: "Authorization: Bearer X", "Bearer X", "Basic X"
_BEARER = re.compile(r"(?P<lead>\b(?:[Bb]earer|BEARER|[Bb]asic|BASIC)\s+)(?P<value>[A-Za-z0-9._~+/=-]{6,})")
# the userinfo of a URL runs to the last "@" before the next space: a password may hold "/" or "@" as typed; with no
# ":" the whole userinfo is the secret (https://TOKEN@host, git's way)
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>\S*)@")
# the same without a scheme (``user:TOKEN@host``, ``//user:TOKEN@host``), as a word of its own or quoted
# (the password may hold "/" as typed, oauth2:ab/V@host, but not begin with one: C:/path/name@2x.png is a path; nor
# be a URL: llm:https://u:V@host is a policy spec whose URL is masked above)
_BARE_USERINFO = re.compile(r"(?P<lead>(?:^|[\s'\"(=])(?://)?)(?P<user>[^\s:/@'\"]+):(?!\w[\w+.-]*://)(?P<secret>[^\s@'\"/][^\s@'\"]*)@")
# an environment assignment as a shell line writes it (``HF_TOKEN=hf_... make experiment``), masked when its name
# says secret, and the tokens of the services rlft meets, recognised by their shape wherever they stand
_ENV_ASSIGNMENT = re.compile(r"(?P<lead>(?:^|[\s;'\"(:]))(?P<name>[A-Za-z_][A-Za-z0-9_]*)="
                             r"(?P<value>\$?'[^'\n]*'|\$?\"[^\"\n]*\"|[^\s;'\")]+)")  # HF_TOKEN=$'V', "V", V
# the shapes of GitHub's, GitLab's, Slack's, AWS's and Google's tokens, and a JWT
_TOKEN_SHAPES = re.compile(r"\b(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
                           r"|github_pat_\w{20,}|glpat-[\w-]{20,}|xox[abpors]-[\w-]{10,}|AKIA[0-9A-Z]{16}"
                           r"|AIza[\w-]{35}|eyJ[\w-]{5,}\.[\w-]{5,}\.[\w-]*)")
# a secret-named key written as a header, JSON, YAML or an assignment: ``X-Api-Key: V``, ``PRIVATE-TOKEN: V``,
# ``"api_key": "V"``, ``token: V``, ``HF_TOKEN="V"``, ``--hub-token=V``. After ":" the value must end its line, its
# quote or its item (a header, a YAML or JSON entry), so prose ("rate-limiting this token: wait and push") is left alone
_KEY_LEAD = r"(?P<lead>(?:^|[\s{,;'\"(\[])(?:--)?)(?P<q1>[\"']?)"
_KEYED = re.compile(_KEY_LEAD + r"(?P<name>[A-Za-z][A-Za-z0-9_.-]*)(?P=q1)(?P<sep>\s*(?::|=>?)\s*)(?P<q2>[\"']?)"
                    r"(?P<value>[^\s'\",;}\]]+)(?P=q2)(?=$|[\s,;}\])'\"#])", re.MULTILINE)
_ITEM_END = re.compile(r"[ \t]*(?:$|#|[,;}\])'\"])", re.MULTILINE)  # what may follow a ":" value: its item ends
# an Authorization (or Cookie) header's value is all of it to the line's or the quote's end: "Authorization: token V"
_AUTHORIZATION = re.compile(_KEY_LEAD + r"(?P<name>(?:proxy-)?authorization|(?:set-)?cookie)(?P=q1)"
                            r"(?P<sep>\s*[:=]\s*)(?P<q2>[\"']?)(?P<value>[^\r\n'\"]+)", re.MULTILINE | re.IGNORECASE)
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")  # accessToken, apiKey: the names of JSON and JavaScript
# an XML element of a secret name (<token>V</token>) and a YAML block scalar under one ("secret: |" and its lines)
_XML_SECRET = re.compile(r"<(?P<name>[A-Za-z][\w.-]*)>(?P<value>[^<]+)</(?P=name)>")
_YAML_BLOCK = re.compile(r"^(?P<head>[ \t]*-?[ \t]*[\"']?(?P<name>[A-Za-z][\w.-]*)[\"']?[ \t]*:[ \t]*[|>][-+0-9]*"
                         r"[ \t]*)\n(?P<body>(?:[ \t]+\S.*(?:\n|$))+)", re.MULTILINE)
# credentials by their place on a command line: curl's "-u user:V", "wandb login V", "huggingface-cli login --token"
# (curl's -uU:V and --user=U:V too, login's own options before the key, a password option of mysql or sshpass)
_CLI_CREDENTIAL = re.compile(r"(?P<lead>(?:^|\s)(?:(?:-u\s*|--user[\s=]+)[^\s:'\"]+:|(?:wandb|huggingface-cli|hf)\s+"
                             r"(?:auth\s+)?login\s+(?:--[a-z-]+\s+)*|(?:mysql|mysqldump|mariadb|sshpass)\b[^\n;|&]*?\s-p\s*))"
                             r"(?P<value>[^\s'\"-][^\s'\"]*)")
_NOT_A_VALUE = {"null", "none", "~", "true", "false", MASK}
# in a URL's query or its fragment (an OAuth redirect's #access_token=V), a storage signature (?sig=V) included
# (a presigned S3/GCS/CloudFront link's signature is a credential as much: X-Amz-Signature, Signature; ;jsessionid=)
_QUERY_SECRET = re.compile(r"(?P<key>[?&#;](?:[^=&#;\s]*(?:token|key|passw|pwd|secret|signature|session|jwt|auth(?!or))"
                           r"[^=&#;\s]*|sig|pass)=)(?P<value>[^&#;\s]+)", re.IGNORECASE)
# a quoted key with spaces in its name ({"API Key": "V"})
_SPACED_KEY = re.compile(r"(?P<q>[\"'])(?P<name>[A-Za-z][\w.-]*(?: [\w.-]+)+)(?P=q)(?P<sep>\s*[:=]\s*)(?P<q2>[\"'])"
                         r"(?P<value>[^\"'\n]+)(?P=q2)")
# a secret option and its value as a command line writes them, in prose (a card, a title, a run name): "--hub-token
# V", quoted or not, after any white space; a value that is another option, a variable or a placeholder is none
_OPTION_VALUE = re.compile(r"(?P<lead>(?:^|[\s`'\"(\[])--?(?P<name>[A-Za-z][A-Za-z0-9_-]*)[\s\u00a0]+)(?P<q>['\"]?)"
                           r"(?P<value>[^\s'\"`$<{\-][^\s'\"`]*)(?P=q)")
_PROSE_WORD = re.compile(r"[a-z]{1,7}[.,:;!?)]?$")  # "use --token or HF_TOKEN", "the --token option": a word goes on
# a PEM private key, whole
_PEM = re.compile(r"-----BEGIN (?P<kind>[A-Z ]*PRIVATE KEY)-----.*?(?:-----END (?P=kind)-----|$)", re.DOTALL)
# a .netrc line ("machine h login u password V")
_NETRC = re.compile(r"(?P<lead>\blogin\s+\S+\s+password\s+)(?P<value>\S+)")


def is_secret_name(name: str) -> bool:
    """True for a key or option name that holds a secret (``hub_token``, ``--api-key``, ``HF_TOKEN``, camelCase
    ``accessToken``...)."""
    snake = _CAMEL.sub(r"\1_\2", str(name).lstrip("-"))
    return bool(_SECRET_NAME.search(snake.lower().replace("-", "_")))


def is_secret_option(name: str) -> bool:
    """True for an option that holds a secret: a secret name, or a bare credential word (``--key``, ``--pass``)."""
    return is_secret_name(name) or bool(_SECRET_OPTION.match(str(name).lstrip("-").lower()))


def _masked_userinfo(match: re.Match) -> str:
    # the whole userinfo, as git masks it: a token is often the user part (https://TOKEN:x-oauth-basic@host)
    return f"{match['scheme']}{MASK}@"


def _secret_env(name: str) -> bool:
    return is_secret_name(name) or (name.isupper() and bool(_SECRET_ENV.search(name)))


def _masked_keyed(match: re.Match) -> str:
    name = match["name"].replace("-", "_")
    if not (_secret_env(name) or name.lower() == "pass") or match["value"].strip().lower() in _NOT_A_VALUE:
        return match[0]
    if ":" in match["sep"] and not match["q2"] and not _ITEM_END.match(match.string, match.end()):
        return match[0]  # "this token: wait and push": a sentence goes on after a word, an item does not
    return f"{match['lead']}{match['q1']}{match['name']}{match['q1']}{match['sep']}{match['q2']}{MASK}{match['q2']}"


def redact_text(text: str) -> str:
    """``text`` with URL credentials and secret query values masked (``https://***@host``, ``?token=***``), HTTP
    bearer credentials, and
    every secret value the running command was handed (:func:`known_secrets`) wherever it appears."""
    text = _URL_USERINFO.sub(_masked_userinfo, mask_known(str(text), _KNOWN))
    text = _BARE_USERINFO.sub(lambda m: f"{m['lead']}{MASK}@", text)
    text = _ENV_ASSIGNMENT.sub(lambda m: f"{m['lead']}{m['name']}={MASK}" if _secret_env(m["name"]) else m[0], text)
    text = _BEARER.sub(lambda m: f"{m['lead']}{MASK}", text)
    text = _YAML_BLOCK.sub(lambda m: f"{m['head']}\n" + "".join(
        line[:len(line) - len(line.lstrip())] + MASK + "\n" for line in m["body"].splitlines())
        if _secret_env(m["name"]) else m[0], text)
    # the header's value runs to the line's or the quote's end, which the match leaves in place
    text = _AUTHORIZATION.sub(lambda m: f"{m['lead']}{m['q1']}{m['name']}{m['q1']}{m['sep']}{m['q2']}{MASK}", text)
    text = _KEYED.sub(_masked_keyed, text)
    text = _CLI_CREDENTIAL.sub(lambda m: f"{m['lead']}{MASK}", text)
    text = _OPTION_VALUE.sub(lambda m: f"{m['lead']}{m['q']}{MASK}{m['q']}" if is_secret_option(m["name"])
                             and m["value"] != MASK and not _PROSE_WORD.match(m["value"]) else m[0], text)
    text = _NETRC.sub(lambda m: f"{m['lead']}{MASK}", text)
    text = _PEM.sub(lambda m: f"-----BEGIN {m['kind']}-----{MASK}-----END {m['kind']}-----", text)
    text = _SPACED_KEY.sub(lambda m: f"{m['q']}{m['name']}{m['q']}{m['sep']}{m['q2']}{MASK}{m['q2']}"
                           if _secret_env(m["name"].replace(" ", "_")) else m[0], text)
    text = _XML_SECRET.sub(lambda m: f"<{m['name']}>{MASK}</{m['name']}>" if _secret_env(m["name"]) else m[0], text)
    text = _TOKEN_SHAPES.sub(MASK, text)
    return _QUERY_SECRET.sub(lambda m: f"{m['key']}{MASK}", text)


def redact(value: Any, key: str = "") -> Any:
    """A copy of ``value`` (mappings, lists, strings, anything JSON-able) with every secret masked: the values of
    secret-named keys whole, and the secrets inside other strings (URLs)."""
    if key and is_secret_name(key) and value not in (None, "", False):
        return MASK
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact(v) for v in value)
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_command(text: str) -> str:
    """A command written as one line (``results record --reproduce``) with its secrets masked as
    :func:`redact_argv` masks them."""
    # split at any run of white space, kept as typed ("--api-key  V", a tab, a new line), and masked as one text
    # too: a header's name and its value are two words ("-H 'X-Api-Key: V'")
    parts = re.split(r"(\s+)", str(text))
    parts[0::2] = redact_argv(parts[0::2])
    return redact_text("".join(parts))


def _secret_options(argv: list[str]) -> Iterator[tuple[int, str, str]]:
    """(index, the word as shown, the secret) of each word of ``argv`` that holds a secret option's value, in both
    forms (``--token VALUE``, ``--token=VALUE``)."""
    for i, word in enumerate(argv):
        name, eq, value = word.partition("=")
        if word.startswith("--") and eq and is_secret_option(name):
            yield i, f"{name}={MASK}", value
        elif i and argv[i - 1].startswith("--") and "=" not in argv[i - 1] and is_secret_option(argv[i - 1]):
            yield i, MASK, word


def argv_secrets(argv: list[str]) -> set[str]:
    """The values of ``argv``'s secret options, in both forms: for masking them where another text repeats them."""
    return {secret for _, _, secret in _secret_options(argv)}


def redact_argv(argv: list[str]) -> list[str]:
    """Command words with secret option values masked, in both forms, and URL secrets (and :func:`known_secrets`) in
    any word."""
    masked = {i: shown for i, shown, _ in _secret_options(argv)}
    return [masked[i] if i in masked else redact_text(word) for i, word in enumerate(argv)]


def mask_known(text: str, known: set[str] | frozenset[str]) -> str:
    """``text`` with each of ``known`` (secret values) masked wherever it appears, the longest first, also as a
    library's error writes it escaped (a header's repr: a token holding a new line was printed as ``abc\\ndef``,
    hostile pass 19, B2)."""
    forms = {form for secret in known for form in (secret, _escaped(secret)) if form}
    for secret in sorted(forms, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def _escaped(secret: str) -> str:
    return repr(secret)[1:-1] if not secret.isprintable() else ""


MIN_KNOWN_SECRET = 6  # a shorter value is no credential, and masking it everywhere would garble every word
_KNOWN: set[str] = set()  # the secret values handed to the commands running in this process (known_secrets)


@contextlib.contextmanager
def known_secrets(values: Iterable[Any]) -> Iterator[None]:
    """While a command runs, the secret values it was handed (its secret-named options, a pipeline's secret option
    values) are masked by :func:`redact_text` wherever they appear: in an error line naming a path built from the
    same variable, a report, a card. Scoped: a command run after it (a test, a notebook) is not affected."""
    added = {v for v in values if isinstance(v, str) and len(v) >= MIN_KNOWN_SECRET} - _KNOWN
    _KNOWN.update(added)
    try:
        yield
    finally:
        _KNOWN.difference_update(added)


def environment_secrets(environ: Mapping[str, str] | None = None) -> set[str]:
    """The values of the process's secret-named environment variables (HF_TOKEN, OPENAI_API_KEY, WANDB_API_KEY...):
    a library reads them on its own, and a server may echo one back in an error rlft prints."""
    environ = os.environ if environ is None else environ
    return {v for k, v in environ.items() if _secret_env(k) and len(v) >= MIN_KNOWN_SECRET}


def secret_values(argv: list[str]) -> set[str]:
    """The values secret options take in ``argv``, in both forms: masked wherever else they appear (a pipeline
    variable holding a token used in ``--repo-id me/{tok}`` as well as ``--token {tok}``)."""
    return {value for _, _, value in _secret_options(argv) if len(value) >= MIN_KNOWN_SECRET}


def refuse_secret_text(value: str | None, flag: str, written: str) -> None:
    """A free text a user passes that rlft writes into its outputs (``written``) holding what looks like a secret is
    refused, not masked: the text was typed for what it says (hostile pass 18, B6; pass 20, F2)."""
    if value is not None and redact_text(value) != value:
        raise InvalidInputError(f"{flag} holds what looks like a secret (a token, key or password): {written}",
                                hint=f"take the secret out of {flag}")
