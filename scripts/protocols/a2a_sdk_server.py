"""The official a2a-sdk as the remote agent an agw agent calls (issue 38, the client side): an
A2A 1.0 server on its JSON-RPC binding whose agent answers "Sunny in <what was asked>" word by
word, keeps what each context asked before, asks for input when told to book something, and
counts the tasks it was asked to cancel. Started by run.sh from the a2a/ venv:

    a2a_sdk_server.py PORT_FILE   (writes the port it listens on, then serves until killed)
"""

import asyncio
import socket
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)

asked_before = {}
cancelled = []


class Weather(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            task = Task(id=context.task_id, context_id=context.context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        answering = task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        if "book" in text.lower() and not answering:
            await updater.requires_input(updater.new_agent_message([Part(text="Which day?")]))
            return
        history = asked_before.setdefault(context.context_id, [])
        if answering:
            words = ["Booked ", "for ", text.strip(), "."]
        elif "slow" in text:
            words = [f"w{i} " for i in range(100)]
        else:
            earlier = f" (you asked before: {history[-1]})" if history else ""
            words = ["Sunny ", "in ", text.strip(), earlier, "."]
        history.append(text.strip())
        for i, word in enumerate(words):
            await updater.add_artifact([Part(text=word)], artifact_id="answer", append=i > 0, last_chunk=False)
            if "slow" in text:
                await asyncio.sleep(0.1)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        cancelled.append(context.task_id)
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


async def cancelled_tasks(request):
    return JSONResponse({"cancelled": cancelled})


def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    card = AgentCard(
        name="SDK weather",
        description="The a2a-sdk's weather agent",
        version="1.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="weather", name="weather", description="Says the weather", tags=["weather"])],
    )
    handler = DefaultRequestHandler(agent_executor=Weather(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/") + [Route("/cancelled", cancelled_tasks)]
    with open(sys.argv[1], "w") as f:
        f.write(str(port))
    uvicorn.run(Starlette(routes=routes), fd=sock.fileno(), log_level="warning")


main()
