"""One error hierarchy for everything a user can cause.

Each error says what arrived and what to do about it. The CLI turns a `FlywheelError` into a
one-paragraph message and its `exit_code`; nothing else is caught there, so a bug still shows a
traceback while bad input never does.
"""

from __future__ import annotations

from collections.abc import Sequence


class FlywheelError(Exception):
    """Base of every user-facing error: `message` says what happened, `hint` what to do, and
    `listing` the lines of a table the message points at (what a source offers), printed one per
    line after it. `message` and `hint` are one line each: a newline in them is printed escaped,
    since it may come from untrusted text (a problem id); a table goes in `listing`."""

    exit_code: int = 1

    def __init__(self, message: str, hint: str | None = None, listing: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.listing = tuple(listing)

    def __str__(self) -> str:
        return "\n".join([self.message, *self.listing, *([f"  hint: {self.hint}"] if self.hint else [])])


class InputError(FlywheelError):
    """A command-line value, file or row the user handed in is unusable."""

    exit_code = 2


class VerifierUnavailableError(FlywheelError):
    """The answer verifier could not run at all (its worker process would not start): nothing was
    judged, and nothing is recorded as judged. A machine's problem, never a verdict on an answer."""

    HINT = ("check the machine (free memory, process limits, a working Python with sympy), then run the "
            "command again; a run resumes with --run-id")


class ModelError(FlywheelError):
    """A model could not be found, assembled or loaded offline."""


# --- artifacts and grafts ------------------------------------------------------------------------


class ArtifactError(FlywheelError):
    """An artifact was refused; nothing from it reached the engine."""

    exit_code = 3


class ArtifactMalformedError(ArtifactError):
    """The file is truncated, not safetensors, or its header lacks required fields."""


class ArtifactIntegrityError(ArtifactError):
    """The content SHA-256 recomputed from the bytes differs from the recorded one."""


class ArtifactVersionError(ArtifactError):
    """The artifact's format version is one this build does not know."""


class TemplateMismatchError(ArtifactError):
    """The artifact was prefilled through another graft template than this build's (`prompts.TEMPLATE_VERSION`)."""


class FingerprintMismatchError(ArtifactError):
    """The artifact was computed under another model, dtype, device or attention implementation."""


class ArtifactNotFoundError(ArtifactError):
    """No artifact with that id is in the store."""


# --- library -------------------------------------------------------------------------------------


class LibraryError(FlywheelError):
    """The library root, catalog or index is missing or inconsistent."""


class DepositRefusedError(FlywheelError):
    """A solution was not deposited because its answer is contradicted or unverifiable."""


class CatalogConflictError(LibraryError):
    """A row the user handed in contradicts one already in the catalog (e.g. a reused problem id)."""


class CatalogVersionError(LibraryError):
    """The catalog's schema is one this build does not know (written by a newer version)."""


class CatalogOwnerError(LibraryError):
    """The catalog belongs to another library (`--db` names another library's catalog)."""

    exit_code = 2


class BundleRefusedError(InputError):
    """A bundle was refused as a whole (a bad member or entry anywhere); nothing was imported."""
