"""Test-wide setup: fully offline, and every temporary file inside the checkout."""

import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TMP = ROOT / ".tmp"
TMP.mkdir(exist_ok=True)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"
os.environ.setdefault("GRADIO_TEMP_DIR", str(TMP / "gradio"))
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ.setdefault("TMPDIR", str(TMP))
tempfile.tempdir = str(TMP)
for key in ("OPENAI_API_KEY", "HF_TOKEN", "HUGGINGGPT_LLM_BASE_URL", "HUGGINGGPT_LLM_API_KEY"):
    os.environ.pop(key, None)
