"""A2A 1.0 against agw with the official a2a-sdk (issue 38): the card is resolved and validated by
the SDK, its client sends messages through the JSON-RPC binding (streaming and not), reads tasks,
answers an approval through INPUT_REQUIRED, lists tasks and resubscribes to a running one. Run by
run.sh against a running agw (AGW_BASE), from the a2a/ venv. Each check prints one line; a
failure raises.
"""

import asyncio
import base64
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
from google.protobuf.json_format import MessageToDict
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)

BASE = os.environ["AGW_BASE"]
SDK_URL = os.environ.get("SDK_URL", "")
# A 1×1 PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
passed = 0


def check(name):
    global passed
    passed += 1
    print(f"ok   a2a-sdk: {name}")


def request(text, context_id="", task_id="", immediately=False):
    message = Message(
        message_id=f"m-{text}-{task_id}", role=Role.ROLE_USER, parts=[Part(text=text)], context_id=context_id, task_id=task_id
    )
    configuration = SendMessageConfiguration(return_immediately=immediately)
    return SendMessageRequest(message=message, configuration=configuration)


def webhook():
    """A loopback receiver of push notifications: (url, received [(headers, body)])."""
    received = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            received.append(({k.lower(): v for k, v in self.headers.items()}, json.loads(body)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}/hook", received


async def agw_run(http, body, until=None):
    """A run on agw's native API: its events (stops early once `until(event)` holds)."""
    events = []
    async with http.stream("POST", f"{BASE}/api/ap/query", json=body) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:].strip()))
                if until and until(events[-1]):
                    break
    return events


def remote_result(events):
    return json.loads(next(e for e in events if e.get("type") == "tool.result")["result"])


def answer(task):
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts)


async def main():
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, f"{BASE}/a2a/plain").get_agent_card()
        assert card.supported_interfaces[0].protocol_version == "1.0", card
        assert card.supported_interfaces[0].url.endswith("/a2a/plain"), card
        assert card.capabilities.streaming
        check("the agent card resolves and names the JSON-RPC endpoint")

        # Streaming: the SDK folds the updates into the task it yields.
        streaming = await create_client(card, ClientConfig(httpx_client=http, streaming=True))
        events = [event async for event in streaming.send_message(request("say hello"))]
        assert events[0].HasField("task"), events[0]
        deltas = [e.artifact_update.artifact.parts[0].text for e in events if e.HasField("artifact_update") and e.artifact_update.artifact.parts]
        assert "".join(deltas) == "Hello there.", deltas
        last = events[-1]
        assert last.HasField("status_update"), last
        assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED, last
        task_id, context_id = events[0].task.id, events[0].task.context_id
        check("SendStreamingMessage: the task, one artifact update per delta, then COMPLETED")

        task = await streaming.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert answer(task) == "Hello there.", task
        check("GetTask reads the completed task back with its artifact")

        # Blocking: one task, completed, in the same context (the chat goes on).
        blocking = await create_client(card, ClientConfig(httpx_client=http, streaming=False))
        # (The scripted provider matches the first rule any user message of the chat names.)
        [event] = [event async for event in blocking.send_message(request("about the dosage", context_id))]
        assert event.task.context_id == context_id, event
        assert event.task.status.state == TaskState.TASK_STATE_COMPLETED, event
        assert answer(event.task) == "Take the usual dosage and rest.", event
        check("SendMessage in the same context: the completed task")

        listed = await blocking.list_tasks(ListTasksRequest(context_id=context_id))
        assert listed.total_size == 2 and {t.id for t in listed.tasks} >= {task_id}, listed
        assert all(t.context_id == context_id for t in listed.tasks), listed
        check("ListTasks by context: both tasks of the conversation")

        # A file part is an image of the message, read by the agent's model (issue 39).
        assert "image/png" in card.default_input_modes, card
        picture = Message(
            message_id="m-picture",
            role=Role.ROLE_USER,
            parts=[Part(text="describe the picture"), Part(raw=base64.b64decode(PNG), media_type="image/png", filename="dot.png")],
        )
        [event] = [event async for event in blocking.send_message(SendMessageRequest(message=picture))]
        assert event.task.status.state == TaskState.TASK_STATE_COMPLETED, event
        assert answer(event.task) == "A single dot.", event
        check("a file part (an image) reaches the agent's model with the message; the card lists image/png")

        # An approval is INPUT_REQUIRED; the task's next message (a word) answers it.
        guarded_card = await A2ACardResolver(http, f"{BASE}/a2a/guarded").get_agent_card()
        guarded = await create_client(guarded_card, ClientConfig(httpx_client=http, streaming=False))
        [event] = [event async for event in guarded.send_message(request("guarded forecast"))]
        waiting = event.task
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, waiting
        asked = MessageToDict(waiting.status.message.parts[1].data)
        assert asked["kind"] == "approval" and asked["toolName"] == "mock_city_weather", asked
        answer_request = request("once", waiting.context_id, waiting.id)
        [event] = [event async for event in guarded.send_message(answer_request)]
        assert event.task.id == waiting.id, event
        assert event.task.status.state == TaskState.TASK_STATE_COMPLETED, event
        assert answer(event.task) == "Checked with your approval.", event
        check("an approval: INPUT_REQUIRED, answered by the task's next message, then COMPLETED")

        # Resubscribing to a running task: the task as it stands, then the rest, nothing lost.
        [event] = [event async for event in blocking.send_message(request("survive a crash", immediately=True))]
        running = event.task.id
        await asyncio.sleep(0.5)
        events = [event async for event in streaming.subscribe(SubscribeToTaskRequest(id=running))]
        assert events[0].HasField("task"), events[0]
        text = answer(events[0].task) + "".join(
            e.artifact_update.artifact.parts[0].text
            for e in events
            if e.HasField("artifact_update") and e.artifact_update.artifact.parts
        )
        assert text == "".join(f"w{i} " for i in range(30)), text
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED, events[-1]
        check("SubscribeToTask on a running task: its state so far, then every later update once")

        # The HTTP+JSON binding, the SDK's REST transport: the same task, streamed and read back.
        rest = await create_client(
            card, ClientConfig(httpx_client=http, streaming=True, supported_protocol_bindings=["HTTP+JSON"])
        )
        events = [event async for event in rest.send_message(request("say hello"))]
        deltas = [e.artifact_update.artifact.parts[0].text for e in events if e.HasField("artifact_update") and e.artifact_update.artifact.parts]
        assert "".join(deltas) == "Hello there." and events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED, events
        task = await rest.get_task(GetTaskRequest(id=events[0].task.id))
        assert answer(task) == "Hello there.", task
        check("the HTTP+JSON binding (the SDK's REST transport): streamed, then read back")

        # Push notifications: a config on a running task receives its changes, then the task.
        url, received = webhook()
        [event] = [event async for event in blocking.send_message(request("survive a crash", immediately=True))]
        pushed_task = event.task.id
        config = TaskPushNotificationConfig(
            task_id=pushed_task, url=url, token="tok-sdk", authentication=AuthenticationInfo(scheme="Bearer", credentials="c1")
        )
        created = await blocking.create_task_push_notification_config(config)
        assert created.task_id == pushed_task and created.url == url and created.id, created
        for _ in range(200):
            if received and "task" in received[-1][1]:
                break
            await asyncio.sleep(0.05)
        headers, final = received[-1]
        assert final["task"]["status"]["state"] == "TASK_STATE_COMPLETED", received
        assert headers.get("x-a2a-notification-token") == "tok-sdk" and headers.get("authorization") == "Bearer c1", headers
        check("a push config on a running task: its changes, then the completed task, with its token")

        # agw as the client: the a2a-sdk's server is the remote agent of `a2a_caller`.
        first = await agw_run(http, {"agentKey": "a2a_caller", "message": "relay to the sdk agent"})
        result = remote_result(first)
        assert result["state"] == "completed" and result["answer"] == "Sunny in Paris.", result
        chat = next(e for e in first if e.get("type") == "run.start")["chatId"]
        again = await agw_run(http, {"agentKey": "a2a_caller", "chatId": chat, "message": "once more please"})
        result = remote_result(again)
        assert "you asked before: Paris" in result["answer"], result
        check("agw calls the a2a-sdk's server, streaming; the chat's next call continues the remote context")

        blocking_run = await agw_run(http, {"agentKey": "a2a_caller", "message": "relay blocking to the sdk agent"})
        result = remote_result(blocking_run)
        assert result["state"] == "completed" and result["answer"] == "Sunny in Rome.", result
        check("agw calls the a2a-sdk's server with a blocking SendMessage")

        asking = await agw_run(http, {"agentKey": "a2a_caller", "message": "book through the sdk agent"})
        result = remote_result(asking)
        assert result["state"] == "input_required" and result["question"] == "Which day?" and result["taskId"], result
        check("the a2a-sdk agent's INPUT_REQUIRED reaches agw's model with its question and task")

        slow = await agw_run(
            http,
            {"agentKey": "a2a_caller", "message": "slow through the sdk agent"},
            until=lambda e: e.get("type") == "tool.end",
        )
        run_id = next(e for e in slow if e.get("type") == "run.start")["runId"]
        await asyncio.sleep(1.0)
        interrupted = (await http.post(f"{BASE}/api/ap/interrupt", json={"runId": run_id})).json()
        assert interrupted["data"]["accepted"], interrupted
        for _ in range(60):
            cancelled = (await http.get(f"{SDK_URL}cancelled")).json()["cancelled"]
            if cancelled:
                break
            await asyncio.sleep(0.05)
        assert cancelled, "the a2a-sdk's task was not cancelled"
        check("interrupting agw's run cancels the a2a-sdk's task")


async def with_auth():
    """The same SDK against an agw with auth on (AGW_AUTH_BASE, a token in AGW_TOKEN): the card is
    public and names the bearer scheme; a call without the token is refused; with it the task
    runs, and the extended card is read."""
    base, token = os.environ["AGW_AUTH_BASE"], os.environ["AGW_TOKEN"]
    async with httpx.AsyncClient(timeout=30) as anonymous, httpx.AsyncClient(
        timeout=30, headers={"Authorization": f"Bearer {token}"}
    ) as signed:
        card = await A2ACardResolver(anonymous, f"{base}/a2a/plain").get_agent_card()
        card_dict = MessageToDict(card)
        assert "bearer" in card_dict.get("securitySchemes", {}), card_dict
        assert card.capabilities.extended_agent_card, card
        refused = await create_client(card, ClientConfig(httpx_client=anonymous, streaming=False))
        try:
            [event async for event in refused.send_message(request("say hello"))]
            raise AssertionError("a call without a token was served")
        except AssertionError:
            raise
        except Exception as error:  # the SDK's HTTP error for the 401
            assert "401" in str(error) or "nauthorized" in str(error), repr(error)
        check("auth on: the card is public and names bearer; a call without a token is refused")

        client = await create_client(card, ClientConfig(httpx_client=signed, streaming=False))
        [event] = [event async for event in client.send_message(request("say hello"))]
        assert event.task.status.state == TaskState.TASK_STATE_COMPLETED, event
        assert answer(event.task) == "Hello there.", event
        extended = (
            await signed.post(
                f"{base}/a2a/plain",
                headers={"A2A-Version": "1.0"},
                json={"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}},
            )
        ).json()
        assert extended["result"]["name"], extended
        check("auth on: with the bearer token the task runs and the extended card is read")


asyncio.run(main())
if os.environ.get("AGW_AUTH_BASE"):
    asyncio.run(with_auth())
print(f"a2a-sdk: {passed} passed")
