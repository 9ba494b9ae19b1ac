"""The LLM clients and model endpoints that the app's requests share.

One LLM client per settings tuple (base URL, model, key, public-only), so what a client learns (a
server that refuses structured output) is kept; each request still gets its own call log through
`LLM.recording()`. One local runtime and one hosted client serve every session.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections import OrderedDict

from hugginggpt.config import Settings
from hugginggpt.endpoints import Endpoint, LocalEndpoint, build_backends, build_endpoint
from hugginggpt.factory import build_cache, build_llm
from hugginggpt.llms.interface import LLM, LLMError
from hugginggpt.llms.local import LocalChatLLM
from webui.host.gpu import on_gpu, zerogpu_active

log = logging.getLogger(__name__)


class Backends:
    def __init__(
        self,
        settings: Settings,
        *,
        llm: LLM | None = None,
        endpoint: Endpoint | None = None,
        public: bool = False,
        max_clients: int = 32,
    ):
        self.settings = settings
        self.llm = llm  # injected (tests): used for the server's own LLM settings
        self.endpoint = endpoint  # injected (tests): used for every inference mode
        self.public = public
        self.max_clients = max_clients
        self._clients: OrderedDict[tuple, LLM] = OrderedDict()
        self._local_llms: dict[str, LLM] = {}
        self._backends: dict[str, Endpoint] | None = None
        self._lock = threading.Lock()
        self.warm_state = ""  # what warm_up() is doing, for the status line
        self.cache = build_cache(settings)  # one result cache for every request (it has its own locks)

    def warm_up(self) -> threading.Thread:
        """At app start, in the background: import the model runtime (torch, transformers) and load
        the default local controller LLM when no server is configured, so the first request does
        not wait for either. Progress shows in `warm_state`."""

        def work() -> None:
            try:
                self.warm_state = "importing the model runtime"
                if not LocalEndpoint.load_runtime():
                    self.warm_state = "ready (no local runtime installed)"
                    return
                # On ZeroGPU the GPU is only lent inside decorated calls: no model is loaded here.
                if not self.settings.uses_server and self.llm is None and not zerogpu_active():
                    self.warm_state = f"loading the local LLM {self.settings.local_llm_model}"
                    llm = self.llm_for(self.settings)
                    llm.prepare()  # type: ignore[attr-defined]
                self.warm_state = "ready"
            except ImportError:  # the local LLM's own dependencies
                self.warm_state = "ready (no local runtime installed)"
            except LLMError as e:
                self.warm_state = f"the local LLM is not available: {e}"
                log.warning("warm-up: %s", e)

        thread = threading.Thread(target=work, name="warm-up", daemon=True)
        thread.start()
        return thread

    def llm_for(self, s: Settings) -> LLM:
        server = self.settings
        if self.llm is not None and (s.llm_base_url, s.llm_model) == (server.llm_base_url, server.llm_model):
            return self.llm
        if not s.uses_server:
            name = s.llm_model or s.local_llm_model
            with self._lock:  # a local model is loaded once and shared
                if name not in self._local_llms:
                    self._local_llms[name] = LocalChatLLM(name)
                return self._local_llms[name]
        # A URL a visitor typed on a public app: no redirect or second DNS answer may reach the
        # host's network.
        typed = self.public and s.llm_base_url != server.llm_base_url
        key = (s.llm_base_url, s.llm_model, s.llm_api_key, typed)
        with self._lock:
            client = self._clients.get(key)
            if client is not None:
                self._clients.move_to_end(key)
                return client
        client = build_llm(s, public_only=typed)  # may raise ValueError for a bad URL: not cached
        with self._lock:
            self._clients[key] = client
            while len(self._clients) > self.max_clients:
                self._clients.popitem(last=False)
        return client

    def endpoint_for(self, mode: str, context: contextvars.Context | None = None) -> Endpoint:
        """The endpoint of inference `mode`; `context` is the Gradio request's (ZeroGPU reads it).
        Whom its calls are made for travels with each call (Call.credentials), not in the endpoint."""
        if self.endpoint is not None:
            return self.endpoint
        s = self.settings
        with self._lock:
            if self._backends is None:
                self._backends = build_backends(
                    hf_token=s.hf_token, provider=s.hf_provider, experts_url=s.experts_url
                )
        local = on_gpu(self._backends["local"], context)  # ZeroGPU lends its GPU per request
        return build_endpoint(mode, backends={**self._backends, "local": local})
