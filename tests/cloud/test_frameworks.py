"""Runtime Cloud's framework packages from PyPI, unmodified, run a task in runtimed (issue 25).

Each test drives one package's own API as its documentation shows, on a sandbox of
the real daemon (the `daemon` and `runtime` fixtures of conftest.py), with no language
model: Deep Agents' sandbox backend and provider (langchain-withruntime) called
directly; a Pydantic AI agent run whose model is a scripted FunctionModel calling the
RuntimeToolset's tools (pydantic-ai-withruntime); Google ADK's RuntimeCodeExecutor and
RuntimeToolset called directly (google-adk-withruntime); and the OpenAI Agents SDK's
sandbox session from RuntimeCloudSandboxClient (openai-agents-withruntime). Each writes
a file in the sandbox, runs a command that reads it, checks what a user would check,
and the sandbox is deleted at the end.

The packages live in their own venv, /opt/runtime-test/venv-frameworks (scripts/install-deps,
from requirements-frameworks.txt), beside withruntime 0.35.0 as in venv-cloud:

    RUNTIME_BUILD=build /opt/runtime-test/venv-frameworks/bin/python -m pytest -q \\
        -p no:cacheprovider tests/cloud/test_frameworks.py

Under another python (venv-cloud's `pytest tests/cloud`) the module is skipped.
"""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
import withruntime

FRAMEWORKS_VENV = "/opt/runtime-test/venv-frameworks"
try:
    from deepagents.backends.protocol import ExecuteResponse
    from google.adk.code_executors.code_execution_utils import CodeExecutionInput, File
    from google_adk_withruntime import RuntimeCodeExecutor
    from google_adk_withruntime import RuntimeToolset as AdkRuntimeToolset
    from langchain_withruntime import RuntimeProvider, RuntimeSandbox
    from openai_agents_withruntime import RuntimeCloudSandboxClient, RuntimeCloudSandboxClientOptions
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai_withruntime import RuntimeToolset
except ImportError as missing:
    if sys.prefix == FRAMEWORKS_VENV:
        raise  # the venv made for these tests must have every package
    pytest.skip(f"the framework packages are not installed here ({missing.name}): run this file "
                f"with {FRAMEWORKS_VENV}/bin/python (scripts/install-deps makes it)",
                allow_module_level=True)

SCORES = "name,score\nada,91\nlinus,78\ngrace,85\n"
# SCORES' rows through `sort -t, -k2 -nr | tr , ' '`: the best first.
RANKED = "ada 91\ngrace 85\nlinus 78\n"


T = TypeVar("T")


def _run(work: Coroutine[Any, Any, T]) -> T:
    """asyncio.run with a deadline: a stalled answer (e.g. a body the async client
    waits for until its 120 s timeout) fails the test instead of passing late."""
    return asyncio.run(asyncio.wait_for(work, 60))


def _gone(runtime: withruntime.Runtime, sandbox_id: str) -> bool:
    try:
        runtime.sandboxes.get(sandbox_id)
    except withruntime.NotFoundError:
        return True
    return False


# --- LangChain Deep Agents: langchain-withruntime's RuntimeSandbox backend ----------------


def test_langchain_deep_agents_backend_writes_and_runs(runtime: withruntime.Runtime) -> None:
    """The backend create_deep_agent(backend=RuntimeSandbox(sbx)) gives the agent's
    write_file, execute, read_file, edit_file, ls and grep tools, called as they call it."""
    with runtime.sandboxes.create(labels={"suite": "frameworks"}) as sbx:
        backend = RuntimeSandbox(sbx)
        assert backend.id == sbx.id

        written = backend.write("/workspace/report/scores.csv", SCORES)
        assert written.error is None, written.error

        ran = backend.execute("cd /workspace/report && tail -n +2 scores.csv | sort -t, -k2 -nr"
                              " | tr , ' ' && awk -F, 'NR>1 {s+=$2} END {print s/(NR-1)}' scores.csv")
        assert isinstance(ran, ExecuteResponse)
        assert (ran.exit_code, ran.output, ran.truncated) == (0, RANKED + "84.6667\n", False)

        failed = backend.execute("cat /workspace/report/missing.csv")
        assert failed.exit_code != 0 and "No such file" in failed.output

        edited = backend.edit("/workspace/report/scores.csv", "linus,78", "linus,99")
        assert edited.error is None and edited.occurrences == 1, edited.error
        read = backend.read("/workspace/report/scores.csv")
        assert read.error is None and read.file_data is not None
        # read gives the lines (the middleware numbers them for the model); the file keeps
        # its last newline.
        assert read.file_data["content"] == SCORES.replace("linus,78", "linus,99").rstrip("\n")
        assert sbx.files.read_text("/workspace/report/scores.csv") == SCORES.replace("linus,78", "linus,99")

        listed = backend.ls("/workspace/report")
        assert [e["path"] for e in listed.entries or []] == ["/workspace/report/scores.csv"]
        found = backend.grep("grace", path="/workspace/report")
        assert [(m["path"], m["line"]) for m in found.matches or []] == [("/workspace/report/scores.csv", 4)]

        # Outside /workspace a file travels through a staged copy (files API + exec).
        up = backend.upload_files([("/tmp/in/data.bin", b"\x00\x01runtime\n")])
        assert [u.error for u in up] == [None]
        assert backend.execute("od -An -c /tmp/in/data.bin | tr -s ' '").output == \
            " \\0 001 r u n t i m e \\n\n"
        down = backend.download_files(["/tmp/in/data.bin", "/tmp/in/none"])
        assert (down[0].content, down[0].error) == (b"\x00\x01runtime\n", None)
        assert down[1].error == "file_not_found"
        sandbox_id = sbx.id
    assert _gone(runtime, sandbox_id)


def test_langchain_provider_creates_and_stops_a_sandbox(runtime: withruntime.Runtime) -> None:
    """RuntimeProvider (dcode --sandbox runtime) reads RUNTIME_API_URL and RUNTIME_API_KEY,
    creates a sandbox, attaches to it by id, and stops it."""
    provider = RuntimeProvider()
    backend = provider.get_or_create(labels={"suite": "frameworks"})
    try:
        assert backend.write("/workspace/hello.py", "print('hello from', __name__)\n").error is None
        again = provider.get_or_create(sandbox_id=backend.id)
        ran = again.execute("python3 /workspace/hello.py")
        assert (ran.exit_code, ran.output) == (0, "hello from __main__\n")
        provider.delete(sandbox_id=backend.id)
        assert runtime.sandboxes.get(backend.id).state == "stopped"
        with pytest.raises(KeyError):
            provider.get_or_create(sandbox_id="no-such-sandbox")
    finally:
        runtime.sandboxes.delete(backend.id)
    assert _gone(runtime, backend.id)


# --- Pydantic AI: pydantic-ai-withruntime's RuntimeToolset -------------------------------


def _scripted_model() -> FunctionModel:
    """A model that writes a file, runs a command that reads it, reads another file and
    lists the directory, then answers with what the command printed: the tool calls a
    real model would make, without one."""
    calls = [
        ToolCallPart("runtime_write_file", {"path": "report/scores.csv", "content": SCORES}),
        ToolCallPart("runtime_exec", {"command": "tail -n +2 scores.csv | sort -t, -k2 -nr | tr , ' '"
                                      " | tee ranked.txt", "cwd": "report"}),
        ToolCallPart("runtime_read_file", {"path": "/workspace/report/ranked.txt"}),
        ToolCallPart("runtime_list_files", {"path": "report"}),
        ToolCallPart("runtime_exec", {"command": "echo oops >&2; exit 3"}),
    ]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert {t.name for t in info.function_tools} == {
            "runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"}
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if turn < len(calls):
            return ModelResponse(parts=[calls[turn]])
        ranked = [p.content for m in messages for p in getattr(m, "parts", [])
                  if isinstance(p, ToolReturnPart) and p.tool_name == "runtime_read_file"]
        return ModelResponse(parts=[TextPart(f"best: {ranked[0].split()[0]}")])

    return FunctionModel(respond)


def test_pydantic_ai_toolset_runs_an_agents_tool_calls(runtime: withruntime.Runtime) -> None:
    """Agent(model, toolsets=[RuntimeToolset(sandbox)]): the run's tool calls write,
    run, read and list in the sandbox; the sandbox passed in is left to its owner."""

    async def run() -> tuple[Any, str]:
        client = withruntime.AsyncRuntime()
        try:
            async with await client.sandboxes.create(labels={"suite": "frameworks"}) as sbx:
                toolset = RuntimeToolset(sbx)
                agent = Agent(_scripted_model(), toolsets=[toolset])
                result = await agent.run("Rank the scores in report/scores.csv.")
                assert toolset.sandbox is sbx and (await client.sandboxes.get(sbx.id)).state == "running"
                assert (await sbx.files.read_text("/workspace/report/ranked.txt")) == RANKED
                return result, sbx.id
        finally:
            await client.close()

    result, sandbox_id = _run(run())
    returns = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [p.tool_name for p in returns] == [
        "runtime_write_file", "runtime_exec", "runtime_read_file", "runtime_list_files", "runtime_exec"]
    wrote, ranked, read, listed, failed = (p.content for p in returns)
    assert wrote == f"Wrote {len(SCORES)} bytes to /workspace/report/scores.csv"
    assert ranked == {"exit_code": 0, "stdout": RANKED, "stderr": "", "timed_out": False}
    assert read == RANKED
    assert listed == [
        {"path": "/workspace/report/ranked.txt", "type": "file", "size": len(RANKED)},
        {"path": "/workspace/report/scores.csv", "type": "file", "size": len(SCORES)},
    ]
    assert failed == {"exit_code": 3, "stdout": "", "stderr": "oops\n", "timed_out": False}
    assert result.output == "best: ada"
    assert _gone(runtime, sandbox_id)


def test_pydantic_ai_toolset_making_its_own_sandbox(runtime: withruntime.Runtime) -> None:
    """RuntimeToolset() without a sandbox makes one per run with Runtime Cloud's 30-minute
    lease (timeoutSeconds 1800, onLeaseEnd stop), which runtimed keeps; the run's sandbox
    is made, used and stopped at the run's end."""

    async def run() -> Any:
        toolset = RuntimeToolset(create={"labels": {"suite": "frameworks-own"}})

        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            turn = sum(isinstance(m, ModelResponse) for m in messages)
            if turn == 0:
                return ModelResponse(parts=[
                    ToolCallPart("runtime_write_file", {"path": "job.sh", "content": "echo job $((2 + 3))\n"}),
                ])
            if turn == 1:
                return ModelResponse(parts=[ToolCallPart("runtime_exec", {"command": "bash job.sh"})])
            return ModelResponse(parts=[TextPart("done")])

        return await Agent(FunctionModel(respond), toolsets=[toolset]).run("Run job.sh.")

    result = _run(run())
    returns = [p.content for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns == ["Wrote 20 bytes to /workspace/job.sh",
                       {"exit_code": 0, "stdout": "job 5\n", "stderr": "", "timed_out": False}]
    # The run made one sandbox, labelled as the toolset labels it, and stopped it at its end.
    made = list(runtime.sandboxes.list(labels={"suite": "frameworks-own"}, include_stopped=True))
    assert [(s.state, s.info["labels"]) for s in made] == [
        ("stopped", {"created_by": "pydantic-ai", "suite": "frameworks-own"})]
    assert (made[0].info["timeoutSeconds"], made[0].info["onLeaseEnd"]) == (1800, "stop")
    sandbox_id = made[0].id
    made[0].delete()
    assert _gone(runtime, sandbox_id)


# --- Google ADK: google-adk-withruntime's RuntimeCodeExecutor and RuntimeToolset ----------


def test_google_adk_code_executor_runs_python_on_an_input_file(runtime: withruntime.Runtime) -> None:
    """Agent(code_executor=RuntimeCodeExecutor(sandbox_id=...)): each block's input files
    are written to /workspace and the block runs in a fresh python3 there."""
    with runtime.sandboxes.create(labels={"suite": "frameworks"}) as sbx:
        executor = RuntimeCodeExecutor(sandbox_id=sbx.id, timeout_seconds=30)
        code = ("import csv\n"
                "rows = list(csv.DictReader(open('scores.csv')))\n"
                "best = max(rows, key=lambda r: int(r['score']))\n"
                "open('best.txt', 'w').write(best['name'])\n"
                "print(len(rows), best['name'], sum(int(r['score']) for r in rows))\n")
        result = executor.execute_code(None, CodeExecutionInput(
            code=code, input_files=[File(name="scores.csv", content=SCORES)]))
        assert (result.stdout, result.stderr, result.exit_code) == ("3 ada 254\n", "", 0)
        assert sbx.files.read_text("/workspace/best.txt") == "ada"

        failed = executor.execute_code(None, CodeExecutionInput(code="import sys; sys.exit('no data')"))
        assert (failed.stdout, failed.stderr, failed.exit_code) == ("", "no data\n", 1)
        slow = RuntimeCodeExecutor(sandbox_id=sbx.id, timeout_seconds=1).execute_code(
            None, CodeExecutionInput(code="import time; time.sleep(30)"))
        assert slow.exit_code == 124 and "Timed out" in slow.stderr
        executor.close()  # a sandbox named by id is its owner's: left running
        assert runtime.sandboxes.get(sbx.id).state == "running"
        sandbox_id = sbx.id
    assert _gone(runtime, sandbox_id)


def test_google_adk_toolset_tools_write_and_run(runtime: withruntime.Runtime) -> None:
    """Agent(tools=[RuntimeToolset(sandbox)]): the ADK FunctionTools it gives, run as
    ADK's runner runs them (run_async with the model's arguments)."""

    async def run() -> str:
        client = withruntime.AsyncRuntime()
        try:
            async with await client.sandboxes.create(labels={"suite": "frameworks"}) as sbx:
                toolset = AdkRuntimeToolset(sbx)
                tools = {t.name: t for t in await toolset.get_tools()}
                assert set(tools) == {"runtime_exec", "runtime_read_file", "runtime_write_file",
                                      "runtime_list_files"}
                declaration = tools["runtime_exec"]._get_declaration()
                assert declaration is not None and "command" in str(declaration)
                wrote = await tools["runtime_write_file"].run_async(
                    args={"path": "scores.csv", "content": SCORES}, tool_context=None)
                assert wrote == f"Wrote {len(SCORES)} bytes to /workspace/scores.csv"
                ran = await tools["runtime_exec"].run_async(
                    args={"command": "awk -F, 'NR>1 && $2>80 {print $1}' scores.csv"}, tool_context=None)
                assert ran == {"exit_code": 0, "stdout": "ada\ngrace\n", "stderr": "", "timed_out": False}
                read = await tools["runtime_read_file"].run_async(args={"path": "nope.txt"}, tool_context=None)
                assert read == "No such file: /workspace/nope.txt"
                await toolset.close()  # a sandbox passed in is never stopped
                assert (await client.sandboxes.get(sbx.id)).state == "running"
                return sbx.id
        finally:
            await client.close()

    assert _gone(runtime, _run(run()))


# --- OpenAI Agents SDK: openai-agents-withruntime's RuntimeCloudSandboxClient -------------


def test_openai_agents_sandbox_client_session_writes_and_runs(runtime: withruntime.Runtime) -> None:
    """SandboxRunConfig(client=RuntimeCloudSandboxClient(), ...): the session a
    SandboxAgent's shell and file tools use, created, written, run, read and deleted
    through the client as the Agents SDK's runner does."""

    async def run() -> tuple[Any, Any, bytes, str]:
        client = RuntimeCloudSandboxClient()
        session = await client.create(options=RuntimeCloudSandboxClientOptions(labels={"suite": "frameworks"}))
        try:
            async with session:
                await session.write(Path("report/scores.csv"), io.BytesIO(SCORES.encode()))
                ranked = await session.exec("tail -n +2 report/scores.csv | sort -t, -k2 -nr | tr , ' '"
                                            " | tee report/ranked.txt; pwd", shell=True)
                failed = await session.exec("cat", "report/none.txt")
                read = (await session.read(Path("report/ranked.txt"))).read()
                sandbox_id = session.state.sandbox_id
        finally:
            await client.delete(session)
        return ranked, failed, read, sandbox_id

    ranked, failed, read, sandbox_id = _run(run())
    assert (ranked.exit_code, ranked.stdout.decode(), ranked.stderr) == (0, RANKED + "/workspace\n", b"")
    assert failed.exit_code == 1 and b"No such file" in failed.stderr
    assert read == RANKED.encode()
    # The client's delete stops the session's sandbox (its disk is kept, as on Runtime Cloud).
    assert runtime.sandboxes.get(sandbox_id).state == "stopped"
    runtime.sandboxes.delete(sandbox_id)
    assert _gone(runtime, sandbox_id)
