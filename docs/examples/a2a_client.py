"""Hand work to a Loom fleet from any A2A client: the a2a-sdk's own client, nothing of Loom's.

Run against a Weft (docs/a2a.md):  WEFT_URL=http://127.0.0.1:8080 WEFT_TOKEN=tok \
    LOOM_PROJECT_ID=demo python docs/examples/a2a_client.py "Fix the flaky parser test"
"""

import asyncio
import os
import sys
import uuid

import httpx
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_artifact_text
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState


async def main(description: str) -> None:
    url = f"{os.environ['WEFT_URL']}/a2a/{os.environ['LOOM_PROJECT_ID']}"
    headers = {"Authorization": f"Bearer {os.environ['WEFT_TOKEN']}"} if os.environ.get("WEFT_TOKEN") else {}
    async with httpx.AsyncClient(headers=headers, timeout=None) as http:
        # Fetches the project's Agent Card (url/.well-known/agent-card.json) and picks its JSON-RPC interface.
        client = await create_client(url, ClientConfig(httpx_client=http))
        message = Message(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            parts=[Part(text=description)],
            metadata={"capability": "code", "priority": 8},  # Loom fields of the work item
        )
        task_id = ""
        # Streams (SendStreamingMessage): the task, then its status updates until it ends.
        async for event in client.send_message(SendMessageRequest(message=message)):
            if event.HasField("task"):
                task_id = event.task.id
                print("task", task_id, TaskState.Name(event.task.status.state))
            elif event.HasField("status_update"):
                status = event.status_update.status
                note = " ".join(p.text for p in status.message.parts)
                print("status", TaskState.Name(status.state), note)
            elif event.HasField("artifact_update"):
                print("result", get_artifact_text(event.artifact_update.artifact))
        task = await client.get_task(GetTaskRequest(id=task_id))
        print("final", TaskState.Name(task.status.state))
        await client.close()


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "Fix the flaky parser test"))
