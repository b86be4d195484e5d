"""The executor registry (names -> executors, read by the CLI and the worker alike) and the model
client's transport seam (the transports handed to the client, as httpx takes a transport)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from harnesses.activations import skills_fired
from harnesses.adapter import HarnessAdapter
from harnesses.registry import HARNESSES, executor_help, honoured_terms, trigger_executors
from producer.plan.case_terms import HONOURS
from schemas.errors import ConfigError
from schemas.model_config import ModelLimits, parse_model_config
from schemas.trajectory import ToolCallEvent
from worker.executor.registry import BuiltinAgent, Command, HarnessExecutor, executor_for
from worker.models.base import ModelReply, ModelRequest
from worker.models.client import GatedModelClient
from worker.models.transports import Transports


def test_every_executor_value_finds_its_executor_and_an_unknown_one_is_refused_by_name() -> None:
    assert isinstance(executor_for("agent"), BuiltinAgent)
    assert executor_for("cmd:claude -p") == Command("cmd:claude -p")
    for name in HARNESSES:
        found = executor_for(name)
        assert isinstance(found, HarnessExecutor) and found.harness.name == name
    with pytest.raises(ConfigError) as err:
        executor_for("recorded:elsewhere")
    assert all(name in str(err.value) for name in HARNESSES)


def test_the_cli_and_the_checks_read_every_harness_from_the_registry() -> None:
    help_text = executor_help()
    assert help_text.startswith("agent, ") and all(name in help_text for name in HARNESSES)
    assert set(honoured_terms()) == {"agent", *HARNESSES} and honoured_terms() == HONOURS
    assert honoured_terms()["claude-code"] >= {"mocks", "allowed_tools"}
    assert honoured_terms()["codex"] == frozenset({"max_turns", "timeout_s", "mocks", "allowed_tools"})
    assert trigger_executors() == ("agent", "claude-code", "codex", "gemini-cli", "copilot-cli")


def test_an_adapter_derives_its_binary_variable_and_install_hint_from_its_name_and_package() -> None:
    class Made(HarnessAdapter):
        name = "made-up-cli"
        package = "made-up-cli@1.2.3"
        binary_name = "made"
        protocol = "openai"

    made = Made()
    assert made.binary_env == "SKILL_EVAL_MADE_UP_CLI_BIN"
    assert made.install_hint == "run `make setup` (installs made-up-cli@1.2.3), or set SKILL_EVAL_MADE_UP_CLI_BIN"
    assert not made.records_triggers and made.honours == frozenset({"max_turns", "timeout_s"})
    call = ToolCallEvent(call_id="c1", name="cat", arguments={"path": "skills/greet/SKILL.md"})
    assert not made.activated([call], "greet", "greet", body_sent=True)  # no read tools of its own: no signal
    assert skills_fired(made.skills_in, [call], ["greet"]) == []
    assert HARNESSES["claude-code"]().binary_env == "SKILL_EVAL_CLAUDE_CODE_BIN"


class Recording:
    """A transport that answers every request itself and keeps what it was sent."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sent: list[ModelRequest] = []

    def send(self, request: ModelRequest) -> Any:
        self.sent.append(request)
        return {"text": self.text}

    def reply(self, request: ModelRequest, response: Any, attempts: int) -> ModelReply:
        return ModelReply(content=response["text"])


def test_the_client_sends_through_the_transports_it_is_given(redis_client: redis.Redis) -> None:
    transport = Recording("from the given transport")
    config = parse_model_config({"models": {"anthropic/claude-x": {}}}, api_base_override=None)
    client = GatedModelClient(config, redis_client, run_id="seam", transports=Transports.only(transport))
    reply = client.complete("anthropic/claude-x", [{"role": "user", "content": "hi"}], max_tokens=5)
    assert reply.content == "from the given transport"
    assert [(r.model, r.max_tokens) for r in transport.sent] == [("anthropic/claude-x", 5)]


def test_transports_pick_per_model_and_make_litellm_once_on_first_need() -> None:
    direct, routed = Recording("direct"), Recording("litellm")
    made: list[int] = []

    def litellm() -> Recording:
        made.append(1)
        return routed

    transports = Transports(direct=direct, litellm=litellm)
    assert transports.for_model(ModelLimits(name="openai/qwen", api_base="http://gpu:8000/v1")) is direct
    assert made == []  # no model has needed litellm yet
    assert transports.for_model(ModelLimits(name="anthropic/claude-x")) is routed
    assert transports.for_model(ModelLimits(name="openai/gpt-4.1")) is routed
    assert made == [1]
