// The AG-UI endpoint, driven by AG-UI's own TypeScript client (issue 16): HttpAgent posts the
// RunAgentInput, parses the SSE events, validates each against @ag-ui/core's schemas and runs
// them through verifyEvents (RUN_STARTED first, nothing open at RUN_FINISHED, nothing after
// RUN_ERROR) before applying them to its messages. Run by run.sh against a running agw (AGW_BASE).
import assert from 'node:assert/strict';
import { HttpAgent } from '@ag-ui/client';

const BASE = process.env.AGW_BASE;
let passed = 0;
let counter = 0;

async function check(name, fn) {
  await fn();
  passed += 1;
  console.log(`ok   ag-ui: ${name}`);
}

function agent(key, threadId) {
  return new HttpAgent({ url: `${BASE}/api/ag-ui/${key}`, threadId });
}

function user(text) {
  counter += 1;
  return { id: `user-${counter}`, role: 'user', content: text };
}

/** Runs the agent, recording every event type and how the run finished. */
async function run(a) {
  const types = [];
  const events = [];
  let finished;
  let error;
  const result = await a.runAgent(
    {},
    {
      onEvent: ({ event }) => {
        types.push(event.type);
        events.push(event);
      },
      onRunFinishedEvent: (params) => {
        finished = params;
      },
      onRunErrorEvent: ({ event }) => {
        error = event;
      },
    },
  );
  return { result, types, events, finished, error };
}

await check('plain answer', async () => {
  const a = agent('plain', 'thread-plain');
  a.addMessage(user('say hello'));
  const { types, finished } = await run(a);
  assert.equal(types[0], 'RUN_STARTED');
  assert.equal(types.at(-1), 'RUN_FINISHED');
  assert.equal(finished.outcome, 'success');
  const reply = a.messages.find((m) => m.role === 'assistant');
  assert.equal(reply.content, 'Hello there.');
});

await check('an image content part (AG-UI 1.0, a data source) is an image of the message the model reads', async () => {
  const a = agent('plain', 'thread-picture');
  a.addMessage({ id: 'user-picture', role: 'user', content: [
    { type: 'text', text: 'describe the picture' },
    { type: 'image', source: { type: 'data', mimeType: 'image/png',
      value: 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==' } },
  ] });
  const { finished } = await run(a);
  assert.equal(finished.outcome, 'success');
  assert.equal(a.messages.find((m) => m.role === 'assistant').content, 'A single dot.');
});

await check('forwardedProps.outputSchema: the JSON is RUN_FINISHED result', async () => {
  const a = agent('plain', 'thread-structured');
  a.addMessage(user('report the weather as json'));
  let finished;
  await a.runAgent(
    { forwardedProps: { outputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
    { onRunFinishedEvent: (params) => { finished = params; } },
  );
  assert.deepEqual(finished.result, { city: 'Paris', celsius: 21 });
});

await check('reasoning events', async () => {
  const a = agent('plain', 'thread-think');
  a.addMessage(user('think first'));
  const { types } = await run(a);
  for (const t of ['REASONING_START', 'REASONING_MESSAGE_START', 'REASONING_MESSAGE_CONTENT', 'REASONING_MESSAGE_END', 'REASONING_END']) {
    assert.ok(types.includes(t), `${t} in ${types}`);
  }
  const reasoning = a.messages.find((m) => m.role === 'reasoning');
  assert.equal(reasoning.content, 'Let me think.');
  assert.equal(a.messages.filter((m) => m.role === 'assistant').at(-1).content, '42');
});

await check('a backend tool round (TOOL_CALL_* and TOOL_CALL_RESULT)', async () => {
  const a = agent('tools', 'thread-weather');
  a.addMessage(user('weather in Paris'));
  const { types } = await run(a);
  assert.ok(types.includes('TOOL_CALL_RESULT'), types.join(','));
  const call = a.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.function.name === 'mock_city_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
  const result = a.messages.find((m) => m.role === 'tool' && m.toolCallId === call.id);
  assert.ok(result && result.content.length > 0);
  assert.equal(a.messages.filter((m) => m.role === 'assistant').at(-1).content, 'Sunny in Paris.');
});

await check('a frontend tool round trip (pendingToolCallIds, then a tool message)', async () => {
  const a = agent('tools', 'thread-ask');
  a.addMessage(user('ask me'));
  const first = await run(a);
  assert.equal(first.finished.outcome, 'success');
  assert.equal(first.finished.pendingToolCallIds.length, 1);
  const callId = first.finished.pendingToolCallIds[0];
  const call = a.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.id === callId);
  assert.equal(call.function.name, 'confirm_dialog');
  a.addMessage({ id: 'tool-1', role: 'tool', toolCallId: callId, content: JSON.stringify({ selectedOption: 'Yes' }) });
  const second = await run(a);
  assert.equal(second.types[0], 'RUN_STARTED');
  assert.equal(second.finished.outcome, 'success');
  assert.equal(a.messages.filter((m) => m.role === 'assistant').at(-1).content, 'You chose.');
});

await check('a tool the client declares is a frontend tool of the run', async () => {
  const a = agent('tools', 'thread-color');
  a.addMessage(user('pick a color'));
  const tools = [{ name: 'pick_color', description: 'Let the user pick a color',
    parameters: { type: 'object', properties: { palette: { type: 'string' } } } }];
  const first = await a.runAgent({ tools });
  const call = a.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.function.name === 'pick_color');
  assert.ok(call, JSON.stringify(a.messages));
  assert.deepEqual(JSON.parse(call.function.arguments), { palette: 'warm' });
  assert.ok(first.newMessages.length > 0);
  a.addMessage({ id: 'tool-color', role: 'tool', toolCallId: call.id, content: 'blue' });
  await a.runAgent({ tools });
  assert.equal(a.messages.filter((m) => m.role === 'assistant').at(-1).content, 'Blue it is.');
});

await check('a plan is the agent state (STATE_SNAPSHOT), tasks are steps', async () => {
  const a = agent('planner', 'thread-plan');
  a.addMessage(user('plan a trip'));
  const { types, finished } = await run(a);
  assert.ok(types.includes('STATE_SNAPSHOT') && types.includes('STEP_STARTED') && types.includes('STEP_FINISHED'), types.join(','));
  assert.equal(finished.outcome, 'success');
  assert.equal(a.state.plan.tasks.length, 1);
  assert.equal(a.state.plan.tasks[0].status, 'completed');
  assert.equal(a.messages.filter((m) => m.role === 'assistant').at(-1).content, 'Trip planned.');
});

await check('sub-agents: SUBAGENT_* frames, every child message attributed to its subagent', async () => {
  const a = agent('lead', 'thread-team');
  a.addMessage(user('team up'));
  const { events, finished } = await run(a);
  assert.equal(finished.outcome, 'success');
  const started = events.filter((e) => e.type === 'SUBAGENT_STARTED');
  assert.deepEqual(started.map((e) => e.name), ['researcher', 'writer', 'writer']);
  assert.ok(started.every((e) => e.parentToolCallId === 'call_team'));
  const [research, haiku, broken] = started.map((e) => e.subagentRunId);
  assert.deepEqual(
    events.filter((e) => e.type === 'SUBAGENT_FINISHED').map((e) => e.subagentRunId).sort(),
    [research, haiku].sort(),
  );
  const failed = events.find((e) => e.type === 'SUBAGENT_ERROR');
  assert.equal(failed.subagentRunId, broken);
  // The client keeps each child's messages apart (subagentRunId), the parent's answer is its own.
  const said = (id) => a.messages.filter((m) => m.role === 'assistant' && m.subagentRunId === id).map((m) => m.content ?? '').join('');
  assert.equal(said(research), 'Sunny in Paris.');
  assert.equal(said(haiku), 'Soft rain falls.');
  const weather = a.messages.find((m) => m.toolCalls?.some((c) => c.function.name === 'mock_city_weather'));
  assert.equal(weather.subagentRunId, research);
  const own = a.messages.filter((m) => m.role === 'assistant' && m.subagentRunId === undefined);
  assert.equal(own.at(-1).content, 'Team done.');
});

// The cited agent's answer (scenario.json "cite the chat"): the model's [cite:<id>] markers, one
// split across chunks, are gone from the text and are CUSTOM agw.citation events instead.
await check('citations are CUSTOM agw.citation events right after their text', async () => {
  const a = agent('cited', 'thread-cited');
  a.addMessage(user('cite the chat'));
  const { events, finished } = await run(a);
  assert.equal(finished.outcome, 'success');
  const answer = a.messages.filter((m) => m.role === 'assistant' && m.content).at(-1);
  assert.equal(answer.content, 'Coral reported the translation bug . Mandy said voice input is off.');
  const citations = events.filter((e) => e.type === 'CUSTOM' && e.name === 'agw.citation');
  assert.equal(citations.length, 2);
  assert.deepEqual(citations[0].value, {
    contentId: answer.id,
    index: 0,
    messageId: '361',
    content: 'The translation in the input box cannot be turned off',
    senderName: 'Coral',
    senderId: '123456',
    timestamp: 1736985600000,
    chatId: '11200463399',
    offset: 35,
    toolId: 'call_msgs',
  });
  assert.deepEqual(
    [citations[1].value.messageId, citations[1].value.senderName, citations[1].value.offset],
    ['401', 'Mandy', 66],
  );
  // Each right after the TEXT_MESSAGE_CONTENT that ends where it stands.
  for (const c of citations) {
    const i = events.indexOf(c);
    assert.equal(events[i - 1].type, 'TEXT_MESSAGE_CONTENT');
    const before = events
      .slice(0, i)
      .filter((e) => e.type === 'TEXT_MESSAGE_CONTENT' && e.messageId === c.value.contentId)
      .map((e) => e.delta)
      .join('');
    assert.equal(before.length, c.value.offset);
    assert.equal(c.subagentRunId, undefined);
  }
});

// The guarded agent (agents/revoked.json): a block after two text deltas is CUSTOM agw.revoke
// naming the message to withdraw, after its TEXT_MESSAGE_END, then RUN_ERROR guardrail_blocked.
await check('a guard\'s revoke is CUSTOM agw.revoke naming the message, then RUN_ERROR', async () => {
  const a = agent('revoked', 'thread-revoked');
  a.addMessage(user('say something dangerous'));
  let events = [];
  let error;
  try {
    ({ events, error } = await run(a));
  } catch (e) {
    error = error ?? e;
  }
  const revoke = events.find((e) => e.type === 'CUSTOM' && e.name === 'agw.revoke');
  assert.ok(revoke, JSON.stringify(events.map((e) => e.type)));
  const shown = events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta).join('');
  assert.equal(shown, 'Here is the nerve ');
  const end = events.findIndex((e) => e.type === 'TEXT_MESSAGE_END');
  assert.ok(end >= 0 && end < events.indexOf(revoke));
  assert.equal(revoke.value.messageId, events[end].messageId);
  assert.deepEqual([revoke.value.guard, revoke.value.rule, revoke.value.statusCode], ['rules:demo', 'forbidden-topic', -1006]);
  const failed = events.find((e) => e.type === 'RUN_ERROR') ?? error;
  assert.equal(failed?.code, 'guardrail_blocked', JSON.stringify(failed));
});

await check('a provider failure is RUN_ERROR, the last event', async () => {
  const a = agent('plain', 'thread-break');
  a.addMessage(user('break please'));
  let types = [];
  let error;
  try {
    ({ types, error } = await run(a));
  } catch (e) {
    error = error ?? e;
  }
  assert.ok(error, 'an error was reported');
  assert.match(String(error.message ?? error), /provider|scripted|400/i);
});

console.log(`ag-ui: ${passed} passed`);
