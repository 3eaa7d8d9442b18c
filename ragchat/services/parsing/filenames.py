"""The name an uploaded file is shown and stored under: no directories, control characters or reserved names."""

from __future__ import annotations

import re
import unicodedata

MAX_FILENAME_CHARS = 150
MAX_FILENAME_BYTES = 240
WINDOWS_RESERVED = re.compile(r"(?i)^(con|prn|aux|nul|com[0-9]|lpt[0-9])$")


def safe_filename(name: str | bytes) -> str:
    """A name safe to show and to store: no directories, control characters or reserved names."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", errors="replace")
    name = unicodedata.normalize("NFC", name)
    name = name.replace("\\", "/").rsplit("/", 1)[-1]  # drop any directory part, absolute or ../
    name = re.sub(r"[\t\n\r\v\f]", " ", name)
    name = "".join(ch for ch in name if unicodedata.category(ch) not in {"Cc", "Cf", "Cs", "Co", "Cn"})
    name = re.sub(r'[<>:"|?*]', "_", name)
    name = re.sub(r"\s+", " ", name).strip(" .")
    stem, dot, extension = name.rpartition(".")
    if not dot:
        stem, extension = name, ""
    if extension and not re.fullmatch(r"[\w-]{1,16}", extension):
        stem, extension = name, ""  # a long or odd "extension" is part of the name
    stem = stem.strip(" .")
    if WINDOWS_RESERVED.match(stem.split(".")[0] if stem else ""):
        stem = f"_{stem}"
    if not stem:
        stem = "document"
    suffix = f".{extension}" if extension else ""
    room = MAX_FILENAME_CHARS - len(suffix)
    stem = stem[:room]
    while len((stem + suffix).encode("utf-8")) > MAX_FILENAME_BYTES:
        stem = stem[:-1]
    return (stem.rstrip(" .") or "document") + suffix
