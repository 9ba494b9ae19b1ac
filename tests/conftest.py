"""Test-wide setup: fully offline, and every temporary file inside the checkout."""

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TMP = ROOT / ".tmp"
TMP.mkdir(exist_ok=True)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"
os.environ.setdefault("GRADIO_TEMP_DIR", str(TMP / "gradio"))
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ.setdefault("TMPDIR", str(TMP))
os.environ.setdefault("HUGGINGGPT_CACHE_DIR", str(TMP / "result-cache"))  # CLI runs in subprocesses
tempfile.tempdir = str(TMP)
for key in (
    "OPENAI_API_KEY",
    "HF_TOKEN",
    "HUGGINGGPT_LLM_BASE_URL",
    "HUGGINGGPT_LLM_API_KEY",
    "HUGGINGGPT_EXPERTS_URL",
    "SPACE_ID",
    "GRADIO_SERVER_NAME",
):
    os.environ.pop(key, None)

# Session fixtures shared by several modules are registered here, once: a fixture imported into two
# test modules would be built once per module.
from app_support import llm_server, tiny_catalog  # noqa: F401
from serve_support import served  # noqa: F401
from tiny_text_audio import tiny  # noqa: F401
from tiny_vision import (  # noqa: F401
    tiny_blip,
    tiny_blip_vqa,
    tiny_controlnet,
    tiny_detr,
    tiny_donut,
    tiny_dpt,
    tiny_llava,
    tiny_sd,
    tiny_sd_controlnet,
    tiny_sd_image_variation,
    tiny_segformer,
    tiny_text_to_video,
    tiny_vilt,
    tiny_vision_root,
    tiny_vit,
    tiny_vit_gpt2,
    tiny_vitpose,
    tiny_vitpose_plus,
)


@pytest.fixture(autouse=True)
def _torch_default_dtype_is_left_alone():
    """Catch a test (or the code under it) that leaves torch's process-wide default dtype changed:
    every later model would silently run in that precision."""
    yield
    torch = sys.modules.get("torch")
    if torch is not None:
        assert torch.get_default_dtype() == torch.float32, "torch's default dtype was left changed"
