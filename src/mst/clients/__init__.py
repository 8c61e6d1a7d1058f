"""Client kinds. Each runs one attempt and types its own ending (docs/endings.md)."""

from mst.clients.base import AttemptOutcome, AttemptRequest, Client, NoSettings, TranscriptRecorder

__all__ = ["AttemptOutcome", "AttemptRequest", "Client", "NoSettings", "TranscriptRecorder"]
