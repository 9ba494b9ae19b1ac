"""The local endpoint: runs models in this process through the models_local runtime.

models_local (and with it torch, transformers, diffusers) is imported only when a model is first
checked or run, so the controller stays light when everything runs hosted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..artifacts import Artifact
from ..catalog import ModelCard
from ..plain_errors import in_words
from ..text import shorten
from .base import Endpoint, EndpointError, ModelUnavailable, Stopped, StopSignal


class LocalEndpoint(Endpoint):
    name = "local"

    def describe(self) -> str:
        return "local (in-process transformers/diffusers runtime)"

    def can_run(self, model: ModelCard) -> bool:
        try:
            import models_local
        except ImportError:  # installed without the local runtime's dependencies
            return False
        return models_local.can_run(
            model.task, model.source, library=model.library, size_bytes=model.size_bytes
        )

    def run(
        self,
        task: str,
        model: ModelCard,
        inputs: dict[str, Any],
        out_dir: Path,
        *,
        stop: StopSignal | None = None,
    ) -> list[Artifact]:
        try:
            import models_local
        except ImportError as exc:
            raise ModelUnavailable(f"{model.id}: the local runtime is not installed ({exc})") from None
        args = {name: str(value) for name, value in inputs.items()}  # the runtime takes plain strings
        try:
            raw = models_local.run(task, model.source, args, Path(out_dir), stop=stop)
        except models_local.Stopped:
            raise Stopped(f"{model.id}: stopped") from None
        except models_local.RuntimeUnsupported as exc:
            raise ModelUnavailable(f"{model.id}: cannot run locally: {shorten(exc)}") from exc
        except Exception as exc:  # the model failed while loading or running: let the caller fall back
            raise EndpointError(f"{model.id} failed locally: {in_words(exc)}") from exc
        try:
            return [Artifact.from_dict(item) for item in raw]
        except (KeyError, TypeError, ValueError) as exc:
            raise EndpointError(f"{model.id}: the local runtime returned a malformed result ({exc})") from exc
