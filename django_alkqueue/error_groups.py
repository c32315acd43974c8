"""Error groups: the fingerprint that puts dead letters with the same error together, as
error trackers do. Pure, no database.

A fingerprint is made of three parts read from a stored error text (the headline
`ExceptionClass: message`, then the traceback):

- the exception class;
- the message with its variable parts replaced by placeholders (`normalise`): quoted
  strings, e-mail addresses, UUIDs, hex ids, identifiers mixing letters and digits and
  numbers, so that `order 151` and `order 137`, `consumer c1` and `consumer c4` are one
  group;
- the innermost frame of the traceback that is not in the standard library or
  site-packages: the application's code that raised (`app_frame`), as its file's last two
  path components and its function, so that another deploy directory or a moved line keeps
  the group.

The dead letter stores the fingerprint (`DeadLetter.error_fingerprint`, written when the job
dies) so that the admin groups with an indexed GROUP BY.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import sysconfig

#: The length of a stored fingerprint (hex digits of a SHA-256).
FINGERPRINT_LENGTH = 32

# The placeholders, applied in this order: a quoted string may hold anything else, an
# e-mail address or a UUID holds digits and hex, a hex id holds digits, and so does an
# identifier.
_PLACEHOLDERS: tuple[tuple[re.Pattern[str], str], ...] = (
    # A quote not glued to a word, so the apostrophe of "can't" opens nothing.
    (re.compile(r"""(?<![\w'"])'[^'\n]*'(?!\w)|(?<![\w'"])"[^"\n]*"(?!\w)"""), "<str>"),
    (re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"), "<email>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b"), "<uuid>"),
    # 0x-prefixed, or 8+ hex digits mixing digits and letters (a hash, an object id).
    (
        re.compile(
            r"\b0[xX][0-9a-fA-F]+\b"
            r"|\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"
        ),
        "<hex>",
    ),
    # A word mixing digits with letters or _ (`c1`, `user_17b`, `30s`, a short hex `a3f5`):
    # a name with a number in it varies between two events of one bug as a number does.
    # Names such as `utf8` go too; the frame keeps the groups of different code apart.
    (re.compile(r"(?<!\w)(?=\w*\d)(?=\w*[^\W\d])\w+(?!\w)"), "<id>"),
    # A number, signed, with decimals or dots.
    (re.compile(r"(?<!\w)-?\d+(?:\.\d+)*(?!\w)"), "<num>"),
)
_CLASS = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+, in (?P<function>.+)$')
_TRACEBACK = "Traceback (most recent call last):"
_LIBRARY_DIRS = re.compile(
    r"[/\\](?:site-packages|dist-packages)[/\\]|[/\\][Ll]ib[/\\]python[\d.]*[/\\]"
)
_STDLIB = tuple(
    path
    for path in {sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")}
    if path
)


def normalise(message: str) -> str:
    """The message with its variable parts replaced: `<str>`, `<email>`, `<uuid>`, `<hex>`,
    `<id>`, `<num>`."""
    for pattern, placeholder in _PLACEHOLDERS:
        message = pattern.sub(placeholder, message)
    return message


def is_library_path(path: str) -> bool:
    """True for a frame of the standard library or of an installed package (site-packages,
    dist-packages), and for code without a file (`<frozen ...>`, `<string>`)."""
    if path.startswith("<"):
        return True
    if _LIBRARY_DIRS.search(path):
        return True
    return any(path.startswith(root) for root in _STDLIB)


def app_frame(text: str) -> str:
    """`package/module.py in function` of the innermost frame of the last traceback in
    `text` that is not library code; "" when there is none."""
    start = text.rfind(_TRACEBACK)
    if start < 0:
        return ""
    for line in reversed(text[start:].splitlines()):
        match = _FRAME.match(line)
        if match and not is_library_path(match["path"]):
            place = "/".join(re.split(r"[/\\]", match["path"])[-2:])
            return f"{place} in {match['function'].strip()}"
    return ""


@dataclasses.dataclass(frozen=True)
class ErrorSignature:
    """What a fingerprint is made of, and what the admin shows of a group."""

    #: The exception class as the headline names it; "" for a text that names none (a
    #: dead letter's reason, such as "expired").
    exception: str
    #: The message, normalised.
    message: str
    #: The application frame that raised, "" when unknown.
    frame: str

    @property
    def title(self) -> str:
        """`ExceptionClass: normalised message`, as a headline reads."""
        if self.exception and self.message:
            return f"{self.exception}: {self.message}"
        return self.exception or self.message

    @property
    def fingerprint(self) -> str:
        key = "\n".join((self.exception, self.message, self.frame))
        return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:FINGERPRINT_LENGTH]


def signature(text: str | None) -> ErrorSignature:
    """The signature of a stored error text (or of an empty one)."""
    head = (text or "").split("\n", 1)[0].strip()
    match = _CLASS.match(head)
    # A headline without ": " is a bare class ("KeyError") when it reads as one: a
    # capitalised or dotted name, not a reason such as "expired".
    if match and (match[2] is not None or head[0].isupper() or "." in head):
        exception, message = match[1], match[2] or ""
    else:
        exception, message = "", head
    return ErrorSignature(exception, normalise(message.strip()), app_frame(text or ""))


def fingerprint(text: str | None) -> str:
    """The fingerprint of a stored error text: what DeadLetter.error_fingerprint holds."""
    return signature(text).fingerprint
