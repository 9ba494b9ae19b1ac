"""The local endpoint: runs models in this process through the models_local runtime.

models_local (and with it torch, transformers, diffusers) is imported only when a model is first
checked or run, so the controller stays light when everything runs hosted.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from hugginggpt.catalog import ModelCard
from hugginggpt.endpoints.base import (
    Call,
    Endpoint,
    EndpointError,
    Footprint,
    ModelUnavailable,
    ProgressReport,
    Result,
    Stopped,
)
from hugginggpt.files.artifacts import Artifact
from hugginggpt.plain_errors import in_words
from hugginggpt.text import shorten

log = logging.getLogger(__name__)


class LocalEndpoint(Endpoint):
    name = "local"

    def describe(self) -> str:
        return "local (in-process transformers/diffusers runtime)"

    @staticmethod
    def load_runtime() -> bool:
        """Import the runtime now (torch, transformers, diffusers), so that a first call does not
        wait for it; False when it is not installed."""
        try:
            import models_local  # noqa: F401
        except ImportError:
            return False
        return True

    @staticmethod
    def prefetch(model: ModelCard, progress: ProgressReport | None = None) -> None:
        """Download the model's weights now, without loading them (ZeroGPU: before the GPU is held).
        A no-op without the runtime; raises what the download raised; `progress` hears how it goes."""
        try:
            import models_local
        except ImportError:
            return
        models_local.prefetch(model.source, progress=progress)

    def can_run(self, model: ModelCard) -> bool:
        try:
            import models_local
        except ImportError:  # installed without the local runtime's dependencies
            return False
        return models_local.can_run(
            model.task, model.source, library=model.library, size_bytes=model.size_bytes
        )

    def warm(self, task: str, model: ModelCard) -> bool:
        try:
            import models_local

            models_local.warm(task, model.source)
        except Exception as exc:  # noqa: BLE001 (the task's own call reports what is wrong)
            log.info("warming %s for %s failed: %s", model.id, task, shorten(exc))
            return False
        return True

    def footprint(self, model: ModelCard) -> Footprint:
        """Measured from the files when the model is in a folder or the HF cache (nothing to
        download); else the catalog's size is what would be downloaded and loaded."""
        import models_local

        if model.library == "builtin":  # no weights
            return Footprint("local", 0, 0, 0)
        found = models_local.footprint_of(model.source)
        where = f"local:{found['device']}"
        if found["download_bytes"] is None:
            size = model.size_bytes
            memory = size // 2 if size is not None and found["half"] else size
            return Footprint(where, size, memory, size, loaded=found["loaded"])
        weights = found["weights_bytes"] or model.size_bytes
        return Footprint(where, 0, found["memory_bytes"], weights, loaded=found["loaded"])

    def run(self, task: str, model: ModelCard, inputs: dict[str, Any], call: Call) -> Result:
        try:
            import models_local
        except ImportError as exc:
            raise ModelUnavailable(f"{model.id}: the local runtime is not installed ({exc})") from None
        args = {name: str(value) for name, value in inputs.items()}  # the runtime takes plain strings
        try:
            raw = models_local.run(
                task, model.source, args, Path(call.out_dir), stop=call.stop, progress=call.progress
            )
        except models_local.Stopped:
            raise Stopped(f"{model.id}: stopped") from None
        except models_local.RuntimeUnsupported as exc:
            raise ModelUnavailable(f"{model.id}: cannot run locally: {shorten(exc)}") from exc
        except Exception as exc:  # the model failed while loading or running: let the caller fall back
            raise EndpointError(f"{model.id} failed locally: {in_words(exc)}") from exc
        try:
            return Result(outputs=[Artifact.from_dict(item) for item in raw], answered_by=self.name)
        except (KeyError, TypeError, ValueError) as exc:
            raise EndpointError(f"{model.id}: the local runtime returned a malformed result ({exc})") from exc


def resident() -> tuple[int, int]:
    """(models loaded, their bytes) in this process; (0, 0) while the runtime was never imported."""
    runtime = sys.modules.get("models_local")
    return runtime.resident() if runtime is not None else (0, 0)
