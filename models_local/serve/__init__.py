"""The expert runtime as a server speaking the Hugging Face inference protocol.

`python -m models_local.serve --port N` serves it from this process (uvicorn); `ray_app.py` serves
it on Ray Serve (serve_config.yaml at the repository root). Both put the same ASGI app (app.py)
in front of models_local.Runtime; protocol.py holds the request and answer shapes per task.
"""

from models_local.serve.app import LocalBackend, create_app
from models_local.serve.settings import ServerSettings

__all__ = ["LocalBackend", "ServerSettings", "create_app"]
