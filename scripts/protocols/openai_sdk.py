"""The OpenAI Chat Completions façade, driven by the official `openai` Python SDK (issue 16).

Run by run.sh against a running agw (AGW_BASE) whose provider is the scripted fixture provider.
Each check prints one line; any failure raises.
"""

import os

import openai
import pydantic

BASE = os.environ["AGW_BASE"]
client = openai.OpenAI(base_url=f"{BASE}/v1", api_key="not-needed", max_retries=0)
passed = []


def check(name):
    def wrap(fn):
        fn()
        passed.append(name)
        print(f"ok   openai-sdk: {name}")
        return fn

    return wrap


@check("models lists the agents")
def _():
    ids = [m.id for m in client.models.list()]
    assert "plain" in ids and "tools" in ids, ids


@check("non-streaming plain answer")
def _():
    r = client.chat.completions.create(model="plain", messages=[{"role": "user", "content": "say hello"}])
    assert r.choices[0].message.content == "Hello there.", r
    assert r.choices[0].finish_reason == "stop"
    assert r.object == "chat.completion"
    assert r.usage.total_tokens == 15, r.usage


@check("streaming answer with reasoning and usage")
def _():
    stream = client.chat.completions.create(
        model="plain",
        messages=[{"role": "user", "content": "think first"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, reasoning, finish, usage, chunks = "", "", None, None, 0
    for chunk in stream:
        chunks += 1
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            extra = choice.delta.model_extra or {}
            reasoning += extra.get("reasoning_content") or ""
            finish = choice.finish_reason or finish
    assert text == "42", text
    assert reasoning == "Let me think.", reasoning
    assert finish == "stop"
    assert usage is not None and usage.prompt_tokens == 10 and usage.completion_tokens == 5, usage
    assert chunks == 7, chunks  # role, 2 reasoning, 2 text, finish, usage


@check("a backend tool round runs inside agw; only the answer reaches the client")
def _():
    r = client.chat.completions.create(model="tools", messages=[{"role": "user", "content": "weather in Paris"}])
    assert r.choices[0].message.content == "Sunny in Paris.", r
    assert not r.choices[0].message.tool_calls


@check("the client's messages are the history")
def _():
    stream = client.chat.completions.create(
        model="plain",
        messages=[
            {"role": "user", "content": "earlier"},
            {"role": "assistant", "content": "noted"},
            {"role": "user", "content": "say hello"},
        ],
        stream=True,
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hello there."


@check("a PLAN_EXECUTE agent answers with its summary")
def _():
    r = client.chat.completions.create(model="planner", messages=[{"role": "user", "content": "plan a trip"}])
    assert r.choices[0].message.content == "Trip planned.", r


@check("sub-agents stay out of the answer: content is the parent's alone (streaming and not)")
def _():
    messages = [{"role": "user", "content": "team up"}]
    r = client.chat.completions.create(model="lead", messages=messages)
    assert r.choices[0].message.content == "Team done.", r
    stream = client.chat.completions.create(model="lead", messages=messages, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Team done.", text


# The cited agent's answer (scenario.json "cite the chat"): the model's [cite:<id>] markers, one
# split across chunks, are gone from the text and are agw's `citations` extension field instead.
CITED_TEXT = "Coral reported the translation bug . Mandy said voice input is off."
CITED = [
    {"index": 0, "messageId": "361", "content": "The translation in the input box cannot be turned off",
     "senderName": "Coral", "senderId": "123456", "timestamp": 1736985600000, "chatId": "11200463399",
     "offset": 35, "toolId": "call_msgs"},
    {"index": 1, "messageId": "401", "content": "Voice to text is not accurate", "senderName": "Mandy",
     "senderId": "789012", "timestamp": 1736990000000, "chatId": "11200463399", "offset": 66,
     "toolId": "call_msgs"},
]


@check("citations: delta.citations right after their text, message.citations, no marker in the text")
def _():
    messages = [{"role": "user", "content": "cite the chat"}]
    stream = client.chat.completions.create(model="cited", messages=messages, stream=True)
    text, citations = "", []
    for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for c in (choice.delta.model_extra or {}).get("citations") or []:
                # Right after the text it belongs to: its offset is where the text has got to.
                assert len(text.encode("utf-16-le")) // 2 == c["offset"], (text, c)
                citations.append(c)
    assert text == CITED_TEXT, text
    assert citations == CITED, citations
    r = client.chat.completions.create(model="cited", messages=messages)
    message = r.choices[0].message
    assert message.content == CITED_TEXT, message
    assert (message.model_extra or {}).get("citations") == CITED, message.model_extra
    assert message.to_dict()["citations"] == CITED


@check("unknown model is a NotFoundError")
def _():
    try:
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    except openai.NotFoundError as e:
        assert e.body["code"] == "model_not_found", e.body
    else:
        raise AssertionError("no error")


@check("a provider failure is a 502 APIStatusError")
def _():
    try:
        client.chat.completions.create(model="plain", messages=[{"role": "user", "content": "break please"}])
    except openai.APIStatusError as e:
        assert e.status_code == 502, e.status_code
        assert e.body["code"] == "provider_error", e.body
    else:
        raise AssertionError("no error")


@check("a provider failure while streaming raises")
def _():
    stream = client.chat.completions.create(
        model="plain", messages=[{"role": "user", "content": "break please"}], stream=True
    )
    try:
        for _ in stream:
            pass
    except openai.APIError as e:
        assert "provider" in str(e).lower() or "scripted" in str(e).lower(), str(e)
    else:
        raise AssertionError("no error")


# The guarded agent (agents/revoked.json): a block after two deltas ends the stream with OpenAI's
# own signal for filtered output, and agw's details of the revoke in the chunk's delta.agw.
@check("a guard's revoke: finish_reason content_filter, delta.agw.revoke with the withdrawn range")
def _():
    stream = client.chat.completions.create(
        model="revoked", messages=[{"role": "user", "content": "say something dangerous"}], stream=True
    )
    text, finish, revoke = "", None, None
    for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
            revoke = ((choice.delta.model_extra or {}).get("agw") or {}).get("revoke") or revoke
    assert text == "Here is the nerve ", text
    assert finish == "content_filter", finish
    assert revoke is not None
    assert (revoke["offset"], revoke["length"]) == (0, len(text)), revoke
    assert (revoke["guard"], revoke["rule"], revoke["statusCode"]) == ("rules:demo", "forbidden-topic", -1006)

    r = client.chat.completions.create(model="revoked", messages=[{"role": "user", "content": "say something dangerous"}])
    assert r.choices[0].finish_reason == "content_filter", r
    assert "nerve" not in (r.choices[0].message.content or ""), r

class Weather(pydantic.BaseModel):
    city: str
    celsius: float


@check("structured output: the SDK's parse() sends a Pydantic model as response_format and reads it back")
def _():
    # `parse` left `beta` in later SDK versions.
    parse = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
    r = parse(model="plain", messages=[{"role": "user", "content": "report the weather as json"}], response_format=Weather)
    parsed = r.choices[0].message.parsed
    assert parsed == Weather(city="Paris", celsius=21), r


@check("an image_url content part reaches the agent's model")
def _():
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    content = [
        {"type": "text", "text": "describe the picture"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
    ]
    r = client.chat.completions.create(model="plain", messages=[{"role": "user", "content": content}])
    assert r.choices[0].message.content == "A single dot.", r


print(f"openai-sdk: {len(passed)} passed")
