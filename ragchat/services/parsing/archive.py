"""ZIP-based formats (Word, PowerPoint, Excel, OpenDocument): refused as bombs from the declared sizes.

Every member's declared size and compression ratio are checked before anything is inflated;
zipfile then stops reading a member at its declared size, so a lying header cannot inflate more.
"""

from __future__ import annotations

import io
import zipfile

from ragchat.services.errors import CorruptDocumentError, DocumentTooLargeError
from ragchat.services.parsing.textutil import human_size

# A member that inflates more than this many times, and to more than the floor below, is a zip
# bomb: real Office and OpenDocument XML compresses roughly 5-30x, a bomb's padding 1000x.
MAX_COMPRESSION_RATIO = 100
RATIO_CHECK_FLOOR_BYTES = 5 * 1024 * 1024
MAX_ZIP_MEMBERS = 10_000


def check_zip(data: bytes, *, max_unpacked_bytes: int, what: str) -> list[str]:
    """Refuse a bomb before it is opened; `what` names the file for its uploader ("Word document").
    Returns the member names."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as e:
        raise CorruptDocumentError(f"This {what} is damaged and cannot be opened.") from e
    if len(members) > MAX_ZIP_MEMBERS:
        raise DocumentTooLargeError(f"This {what} holds too many internal parts to be read safely.")
    total = sum(member.file_size for member in members)
    if total > max_unpacked_bytes:
        raise DocumentTooLargeError(
            f"This {what} unpacks to {human_size(total)}, over the {human_size(max_unpacked_bytes)} limit."
        )
    for member in members:
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > RATIO_CHECK_FLOOR_BYTES and ratio > MAX_COMPRESSION_RATIO:
            raise DocumentTooLargeError(
                f"This {what} is compressed suspiciously hard (a possible zip bomb) and was not opened."
            )
    return [member.filename for member in members]
