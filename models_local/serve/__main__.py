"""`python -m models_local.serve --port N`: the expert server on one machine, without Ray."""

from __future__ import annotations

import argparse
import sys

from models_local.batching import WINDOW_S
from models_local.serve.limits import BODY_SECONDS, MAX_AUDIO_SECONDS, MAX_CONNECTIONS, MAX_PIXELS
from models_local.serve.settings import ServerSettings, cpu_cores, server_threads


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m models_local.serve",
        description="Serve the local expert runtime over the Hugging Face inference protocol.",
    )
    p.add_argument("--port", type=int, required=True)
    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)"
    )
    p.add_argument("--models-dir", metavar="DIR", help="one folder per model id: DIR/name or DIR/owner/name")
    p.add_argument("--no-hub", action="store_true", help="serve only the models folder, no hub ids")
    p.add_argument("--seed", type=int, help="seed for requests that bring none, so outputs repeat")
    p.add_argument("--memory-gb", type=float, help="memory for resident models (default: the runtime's)")
    p.add_argument("--device", help="cpu, cuda, cuda:N or mps (default: the best there is)")
    p.add_argument("--diffusion-steps", type=int, metavar="N", help="denoising steps (default 25)")
    p.add_argument(
        "--max-pixels",
        type=int,
        default=MAX_PIXELS,
        help=f"largest image, width x height (default {MAX_PIXELS})",
    )
    p.add_argument(
        "--max-audio-seconds",
        type=float,
        default=MAX_AUDIO_SECONDS,
        help=f"longest audio clip (default {MAX_AUDIO_SECONDS:g})",
    )
    p.add_argument(
        "--body-seconds",
        type=float,
        default=BODY_SECONDS,
        help=f"time to receive a request's body (default {BODY_SECONDS:g}; then 408)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        help=f"connections at once (default {MAX_CONNECTIONS}; beyond it 503)",
    )
    p.add_argument(
        "--max-connections-per-client",
        type=int,
        default=0,
        help="one client's requests at once (default: a quarter of --max-connections; beyond it 503)",
    )
    p.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="a proxy (address or network) whose X-Forwarded-For names the client; repeatable",
    )
    p.add_argument(
        "--batch-window-ms",
        type=float,
        default=WINDOW_S * 1000,
        help="how long concurrent calls of a model wait for each other to run as one batch "
        f"(default {WINDOW_S * 1000:g}; 0: every call alone)",
    )
    p.add_argument(
        "--torch-threads",
        type=int,
        default=server_threads(),
        help=f"torch's threads for CPU work (default {server_threads()}: every core but one, for HTTP)",
    )
    p.add_argument(
        "--batch-torch-threads",
        type=int,
        default=cpu_cores(),
        help=f"torch's threads while a batch of calls runs (default {cpu_cores()}: every core; "
        "its callers wait for it, so the HTTP side needs less)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = ServerSettings.from_mapping(
            {
                "models_dir": args.models_dir,
                "hub": not args.no_hub,
                "seed": args.seed,
                "memory_gb": args.memory_gb,
                "device": args.device,
                "diffusion_steps": args.diffusion_steps,
                "max_pixels": args.max_pixels,
                "max_audio_seconds": args.max_audio_seconds,
                "body_seconds": args.body_seconds,
                "max_connections": args.max_connections,
                "max_connections_per_client": args.max_connections_per_client,
                "trusted_proxies": args.trusted_proxy,
                "batch_window_ms": args.batch_window_ms,
                "torch_threads": args.torch_threads,
                "batch_torch_threads": args.batch_torch_threads,
            }
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    from models_local.serve.app import LocalBackend, create_app

    limits = settings.limits()
    app = create_app(LocalBackend(settings.runtime()), settings.table(), seed=settings.seed, limits=limits)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", **limits.uvicorn_options())
    return 0


if __name__ == "__main__":
    sys.exit(main())
