"""Generation over the OpenAI-compatible chat API (LLM_PROVIDER=openai), the protocol vLLM,
llama.cpp's server, LM Studio, TGI and LocalAI speak: `POST {LLM_BASE_URL}/chat/completions`
streamed as server-sent events, `GET {LLM_BASE_URL}/models` for the models it serves.

Built on langchain-openai's `BaseChatOpenAI` (the openai SDK underneath): its chunks are the same
`AIMessageChunk`s ChatOllama yields, so `LLMClient` (llm.py) streams, times out, retries and counts
usage for both protocols with one loop. `BaseChatOpenAI` rather than `ChatOpenAI`: the latter
renames `max_tokens` to `max_completion_tokens`, which OpenAI's own service wants and llama.cpp's
servers ignore (the answer would then run to the end of the context window).

Facts about this protocol as the servers speak it:
- the SDK retries by itself (twice) and waits up to 10 minutes: both are turned off here, so the
  product's retry policy and RAG_TIMEOUT_SECONDS govern, as with Ollama;
- usage counts come in a last chunk with no choices when the request asks for them
  (`stream_options: {"include_usage": true}`); servers that ignore the option (llama-cpp-python's)
  send none, and token counts stay estimates;
- there is no tokenize endpoint in the protocol: token counts are estimates, calibrated by usage;
- an error inside a started stream is an SSE event `{"error": {...}}`: LLMResponseError.
"""

from __future__ import annotations

from typing import Any

import httpx
import openai
from langchain_openai.chat_models.base import BaseChatOpenAI
from openai.types.chat import ChatCompletionChunk
from pydantic import SecretStr

from .errors import LLMResponseError, RAGServiceError
from .llm import LLMClient, map_transport_error
from .retry import is_transient_error

# Sent when LLM_API_KEY is empty: the SDK insists on a key, servers without auth ignore it.
NO_API_KEY = "unused"


class OpenAICompatibleLLM(LLMClient):
    """Generation through langchain-openai against any OpenAI-compatible chat API."""

    provider = "openai"
    server = "the OpenAI-compatible server"

    def _headers(self) -> dict[str, str]:
        key = self.settings.llm_api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _chat_model(self, model: str, num_predict: int) -> Any:
        # httpx, not the SDK's own httpx2: the SDK takes httpx clients as they are, and so every
        # transport error (refused, timed out, reset) is one the shared retry and error rules know.
        client = _ChunksAsDicts(
            base_url=self.base_url,
            api_key=self.settings.llm_api_key or NO_API_KEY,
            max_retries=0,
            timeout=self._client_timeout(),  # type: ignore[arg-type]
            http_client=httpx.AsyncClient(  # type: ignore[arg-type]
                timeout=self._client_timeout(), limits=self._client_limits(), verify=self._ssl()
            ),
        )
        return BaseChatOpenAI(
            model=model,
            base_url=self.base_url,
            api_key=SecretStr(self.settings.llm_api_key or NO_API_KEY),
            temperature=self.settings.rag_temperature,
            max_tokens=num_predict,
            stream_usage=True,
            max_retries=0,
            timeout=self._client_timeout(),
            # Our own per-chunk deadline (llm.py `_pull`) is the one that counts.
            stream_chunk_timeout=None,
            use_responses_api=False,
            root_async_client=client,
            async_client=client.chat.completions,
            # Never used (every call is async), but langchain builds one: without this it would load
            # the CA certificates again for each lane.
            http_client=httpx.Client(timeout=self._client_timeout(), verify=self._ssl()),
        )

    def _is_transient(self, e: BaseException) -> bool:
        if isinstance(e, openai.APIConnectionError):
            cause = _transport_cause(e)
            return is_transient_error(cause) if cause is not None else False
        return is_transient_error(e)

    def _map_error(self, e: BaseException, *, model: str) -> RAGServiceError:
        if isinstance(e, openai.APIConnectionError):
            # The transport's own error says what happened (refused, timed out); the SDK's does not.
            e = _transport_cause(e) or ConnectionError(str(e))
        reason = _reason(e)
        in_stream = isinstance(e, openai.APIError) and not isinstance(e, openai.APIStatusError)
        return map_transport_error(
            e, server=self.server, model=model, base_url=self.base_url, reason=reason, in_stream=in_stream
        )

    async def _fetch_models(self) -> tuple[str, ...]:
        try:
            data = await self._get_json("/models", headers=self._headers())
        except LLMResponseError as e:
            cause = e.__cause__
            if isinstance(cause, httpx.HTTPStatusError) and cause.response.status_code == 404:
                # The usual slip: the server's address without the API's root (vLLM's is /v1).
                raise LLMResponseError(
                    f"{e}: is LLM_BASE_URL the API's root, the part before /chat/completions "
                    "(e.g. http://localhost:8000/v1)?"
                ) from cause
            raise
        models = data.get("data") if isinstance(data, dict) else None
        return tuple(str(m["id"]) for m in models or [] if isinstance(m, dict) and m.get("id"))


class _ChunksAsDicts(openai.AsyncOpenAI):
    """The SDK's client, handing each streamed chunk on as the dict it parsed. The SDK builds a
    pydantic object of every chunk and langchain-openai turns it back into a dict at once
    (`model_dump`): measured on this machine, 200-230 us of the event loop per streamed piece,
    against 60 for the Ollama client; with the dicts, 80. langchain-openai takes dicts as
    they are. Anything else the SDK parses (errors, other endpoints) is built as before."""

    def _process_response_data(self, *, data: object, cast_to: Any, response: Any) -> Any:
        if cast_to is ChatCompletionChunk and isinstance(data, dict):
            return data
        return super()._process_response_data(data=data, cast_to=cast_to, response=response)


def _transport_cause(e: BaseException) -> httpx.HTTPError | None:
    """The httpx exception under the SDK's APIConnectionError (wrapped once more by langchain)."""
    seen: set[int] = set()
    current: BaseException | None = e
    while current is not None and id(current) not in seen:
        if isinstance(current, httpx.HTTPError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _reason(e: BaseException) -> str:
    """What the server said: its error body's `message`, else the exception's own text."""
    body = getattr(e, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return str(getattr(e, "message", None) or e)
