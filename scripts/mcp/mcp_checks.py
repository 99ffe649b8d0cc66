"""agw and MCP, both ways, with the official MCP Python SDK (`mcp`, pinned in requirements.lock).

Run by run.sh, which starts agw (AGW_BASE) with the `py` MCP server (py_server.py, the SDK's
MCPServer) declared in AGENT_MCP_EXTERNAL_DIR, and writes AGW_STDIO: a script that starts
`agw mcp-stdio` with the same configuration. Checks:

- an agw agent uses a third-party MCP server: `/api/ap/query` streams the `mcp__py__shout` call's
  `tool.result` and `run.complete`; `/api/ap/chat` replays it;
- the SDK's streamable HTTP client against agw's `/mcp`: the agents are listed as tools, a call
  answers with the agent's text, its chatId and progress notifications carrying the streamed
  text, and a second call with that chatId continues the chat;
- the SDK's stdio client against `agw mcp-stdio`: the same tools and a call.

Each passing check prints `ok <name>`; the exit status is the number of failed checks.
"""

import asyncio
import json
import os
import sys
import traceback
import urllib.request

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

BASE = os.environ["AGW_BASE"]
STDIO = os.environ["AGW_STDIO"]
STDIO_LOG = os.environ.get("AGW_STDIO_LOG", os.devnull)
TIMEOUT = 30

failures = 0


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


async def check(name, body):
    """Runs one check; prints `ok <name>` or the failure."""
    global failures
    try:
        await asyncio.wait_for(body(), TIMEOUT)
        print(f"ok {name}", flush=True)
    except BaseException as e:  # noqa: BLE001 - every failure is reported, then the next check runs
        if isinstance(e, KeyboardInterrupt):
            raise
        failures += 1
        print(f"FAIL {name}: {e!r}", flush=True)
        traceback.print_exc(file=sys.stdout)


def http_json(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
        return resp.read().decode()


def sse_events(text):
    """The `data:` JSON of each SSE frame (heartbeats have none)."""
    events = []
    for frame in text.split("\n\n"):
        data = [line[5:] for line in frame.splitlines() if line.startswith("data:")]
        if data:
            events.append(json.loads("\n".join(data)))
    return events


def answer_text(result):
    return "".join(block.text for block in result.content if getattr(block, "type", None) == "text")


# ------------------------------------------------------------- agw uses a third-party MCP server


async def agent_uses_the_python_mcp_server():
    text = await asyncio.to_thread(http_json, "POST", "/api/ap/query", {"agentKey": "shouter", "message": "shout hello mcp"})
    events = sse_events(text)
    types = [e["type"] for e in events]
    expect(types and types[-1] == "run.complete", f"the stream ends with run.complete: {types}")
    starts = [e for e in events if e["type"] == "tool.start"]
    expect(starts and starts[0].get("toolName") == "mcp__py__shout", f"the model called mcp__py__shout: {starts}")
    results = [e for e in events if e["type"] == "tool.result"]
    expect(results and "HELLO MCP" in results[0]["result"], f"the server's upper-cased text came back: {results}")
    content = "".join(e["delta"] for e in events if e["type"] == "content.delta")
    expect(content == "Shouted.", f"the model answered after the tool: {content!r}")
    chat_id = events[0]["chatId"]
    replay = json.loads(await asyncio.to_thread(http_json, "GET", f"/api/ap/chat?chatId={chat_id}"))
    replayed = replay["data"]["events"]
    expect(any(e["type"] == "tool.result" and "HELLO MCP" in e["result"] for e in replayed), f"replayed: {replayed}")
    expect(replayed[-1]["type"] == "run.complete", f"the replay ends with run.complete: {replayed[-1]}")


# ------------------------------------------------------------------- agw's agents as MCP tools


async def tools_and_a_call(session, progress):
    """Lists the agents, calls `helper`, returns (result, chatId)."""
    listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    expect({"helper", "shouter"} <= set(tools), f"the agents are tools: {sorted(tools)}")
    helper = tools["helper"]
    expect(helper.description == "Answers briefly", f"description: {helper.description!r}")
    expect(helper.input_schema.get("required") == ["message"], f"input schema: {helper.input_schema}")
    expect("chatId" in helper.input_schema.get("properties", {}), f"input schema: {helper.input_schema}")

    async def on_progress(value, total, message):
        progress.append((value, message))

    result = await session.call_tool("helper", {"message": "say hello"}, progress_callback=on_progress)
    expect(not result.is_error, f"the call succeeded: {result}")
    expect(answer_text(result) == "Hello from agw.", f"answer: {answer_text(result)!r}")
    structured = result.structured_content or {}
    expect(structured.get("answer") == "Hello from agw.", f"structuredContent: {structured}")
    chat_id = structured.get("chatId")
    expect(isinstance(chat_id, str) and chat_id, f"chatId: {structured}")
    return result, chat_id


async def mcp_client_over_streamable_http():
    async with streamable_http_client(BASE + "/mcp") as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            progress = []
            _, chat_id = await tools_and_a_call(session, progress)
            # The fixture sends the three chunks 100 ms apart: one notification each, in order.
            messages = "".join(message or "" for _, message in progress)
            expect(messages == "Hello from agw.", f"progress carried the streamed text: {progress}")
            expect([value for value, _ in progress] == [1, 2, 3], f"progress counts the deltas: {progress}")

            again = await session.call_tool("helper", {"message": "and again", "chatId": chat_id})
            expect(answer_text(again) == "Again.", f"second answer: {answer_text(again)!r}")
            expect(again.structured_content["chatId"] == chat_id, f"same chat: {again.structured_content}")
            replay = json.loads(await asyncio.to_thread(http_json, "GET", f"/api/ap/chat?chatId={chat_id}"))
            queries = [e["message"] for e in replay["data"]["events"] if e["type"] == "request.query"]
            expect(queries == ["say hello", "and again"], f"both calls are runs of one chat: {queries}")

            try:
                await session.call_tool("nope", {"message": "hi"})
            except MCPError as e:
                expect(e.error.code == INVALID_PARAMS, f"an unknown tool is invalid params: {e.error}")
            else:
                raise AssertionError("calling an unknown tool must fail")


async def mcp_client_over_stdio():
    with open(STDIO_LOG, "a") as errlog:
        async with stdio_client(StdioServerParameters(command=STDIO), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                expect(init.server_info.name == "agw", f"server info: {init.server_info}")
                progress = []
                await tools_and_a_call(session, progress)
                expect("".join(m or "" for _, m in progress) == "Hello from agw.", f"progress: {progress}")


async def main():
    await check("agent-uses-python-mcp-server", agent_uses_the_python_mcp_server)
    await check("mcp-client-streamable-http", mcp_client_over_streamable_http)
    await check("mcp-client-stdio", mcp_client_over_stdio)
    return failures


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
