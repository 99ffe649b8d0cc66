// The AI SDK UI message stream endpoint, driven by the `ai` package itself (issue 16): its
// DefaultChatTransport (the transport `useChat` uses) sends the requests and parses and validates
// the stream, readUIMessageStream assembles the UIMessage exactly as `useChat` would.
// Run by run.sh against a running agw (AGW_BASE). Each check prints one line; a failure throws.
import assert from 'node:assert/strict';
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  readUIMessageStream,
} from 'ai';

const BASE = process.env.AGW_BASE;
let passed = 0;
let counter = 0;

async function check(name, fn) {
  await fn();
  passed += 1;
  console.log(`ok   ai-sdk: ${name}`);
}

function user(text) {
  counter += 1;
  return { id: `u${counter}`, role: 'user', parts: [{ type: 'text', text }] };
}

/** Sends `messages`, returns the assistant UIMessage as useChat would hold it, and any errors. */
async function send(agent, chatId, messages, continued) {
  const transport = new DefaultChatTransport({ api: `${BASE}/api/ai-sdk/${agent}/chat` });
  const stream = await transport.sendMessages({
    chatId,
    messages,
    trigger: 'submit-message',
    messageId: undefined,
    abortSignal: undefined,
  });
  const errors = [];
  let message;
  for await (const m of readUIMessageStream({
    stream,
    message: continued,
    onError: (e) => errors.push(e),
    terminateOnError: false,
  })) {
    message = m;
  }
  return { message, errors };
}

const text = (m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
// A sub-agent's parts name their task in agw's provider metadata.
const taskOf = (p) => (p.providerMetadata ?? p.callProviderMetadata)?.agw?.taskId;
const parentText = (m) => m.parts.filter((p) => p.type === 'text' && !taskOf(p)).map((p) => p.text).join('');
const childText = (m, taskId) =>
  m.parts.filter((p) => p.type === 'text' && taskOf(p) === taskId).map((p) => p.text).join('');

await check('plain answer', async () => {
  const { message, errors } = await send('plain', 'chat-plain', [user('say hello')]);
  assert.deepEqual(errors, []);
  assert.equal(message.role, 'assistant');
  assert.equal(text(message), 'Hello there.');
  assert.ok(message.parts.some((p) => p.type === 'step-start'));
  assert.equal(message.metadata.chatId.length, 36);
});

const PNG = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

await check('a file part is an image of the message the model reads', async () => {
  const picture = { id: 'user-picture', role: 'user',
    parts: [{ type: 'file', mediaType: 'image/png', url: PNG, filename: 'dot.png' }, { type: 'text', text: 'describe the picture' }] };
  const { message, errors } = await send('plain', 'chat-picture', [picture]);
  assert.deepEqual(errors, []);
  assert.equal(text(message), 'A single dot.');
});

await check('an outputSchema in the transport body gives a data-output part with the JSON', async () => {
  const transport = new DefaultChatTransport({
    api: `${BASE}/api/ai-sdk/plain/chat`,
    body: { outputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
  });
  const stream = await transport.sendMessages({
    chatId: 'chat-structured', messages: [user('report the weather as json')], trigger: 'submit-message',
    messageId: undefined, abortSignal: undefined,
  });
  let message;
  for await (const m of readUIMessageStream({ stream })) message = m;
  const output = message.parts.find((p) => p.type === 'data-output');
  assert.deepEqual(output?.data, { city: 'Paris', celsius: 21 });
});

await check('reasoning parts', async () => {
  const { message } = await send('plain', 'chat-think', [user('think first')]);
  const reasoning = message.parts.filter((p) => p.type === 'reasoning');
  assert.equal(reasoning.length, 1);
  assert.equal(reasoning[0].text, 'Let me think.');
  assert.equal(text(message), '42');
});

await check('a backend tool round (provider-executed dynamic tool part)', async () => {
  const { message } = await send('tools', 'chat-weather', [user('weather in Paris')]);
  const tool = message.parts.find((p) => p.type === 'dynamic-tool');
  assert.ok(tool, JSON.stringify(message.parts));
  assert.equal(tool.toolName, 'mock_city_weather');
  assert.equal(tool.state, 'output-available');
  assert.deepEqual(tool.input, { city: 'Paris' });
  assert.ok(tool.output !== undefined);
  assert.equal(text(message), 'Sunny in Paris.');
});

await check('a frontend tool round trip (addToolResult, then the run continues)', async () => {
  const first = [user('ask me')];
  const { message } = await send('tools', 'chat-ask', first);
  const call = message.parts.find((p) => p.type === 'tool-confirm_dialog');
  assert.ok(call, JSON.stringify(message.parts));
  assert.equal(call.state, 'input-available');
  assert.deepEqual(call.input, { question: 'Go?', options: ['Yes', 'No'] });
  // What addToolResult does to the message, then the transport's next request.
  const answered = structuredClone(message);
  const part = answered.parts.find((p) => p.toolCallId === call.toolCallId);
  part.state = 'output-available';
  part.output = { selectedOption: 'Yes', selectedIndex: 0 };
  const { message: after, errors } = await send('tools', 'chat-ask', [...first, answered], answered);
  assert.deepEqual(errors, []);
  assert.equal(after.id, message.id, 'the same assistant message continues');
  const done = after.parts.find((p) => p.toolCallId === call.toolCallId);
  assert.equal(done.state, 'output-available');
  assert.equal(text(after), 'You chose.');
});

await check('a plan is a data-plan part updated in place, tasks are data-task parts', async () => {
  const { message, errors } = await send('planner', 'chat-plan', [user('plan a trip')]);
  assert.deepEqual(errors, []);
  const plans = message.parts.filter((p) => p.type === 'data-plan');
  assert.equal(plans.length, 1, 'one part, replaced by every update');
  assert.equal(plans[0].data.plan.length, 1);
  assert.equal(plans[0].data.plan[0].status, 'completed');
  const task = message.parts.find((p) => p.type === 'data-task');
  assert.equal(task.data.status, 'completed');
  assert.equal(text(message).endsWith('Trip planned.'), true, text(message));
});

await check('a tool approval (tool-approval-request, then addToolApprovalResponse)', async () => {
  const first = [user('guarded forecast')];
  const { message } = await send('guarded', 'chat-guarded', first);
  const call = message.parts.find((p) => p.type === 'dynamic-tool' && p.toolName === 'mock_city_weather');
  assert.ok(call, JSON.stringify(message.parts));
  assert.equal(call.state, 'approval-requested');
  assert.deepEqual(call.input, { city: 'Rome' });
  // What addToolApprovalResponse({id, approved: true}) does to the message.
  const answered = structuredClone(message);
  const part = answered.parts.find((p) => p.toolCallId === call.toolCallId);
  part.state = 'approval-responded';
  part.approval = { ...part.approval, approved: true };
  const { message: after, errors } = await send('guarded', 'chat-guarded', [...first, answered], answered);
  assert.deepEqual(errors, []);
  const done = after.parts.find((p) => p.toolCallId === call.toolCallId);
  assert.equal(done.state, 'output-available');
  assert.ok(done.output.temperatureC !== undefined, JSON.stringify(done.output));
  assert.equal(text(after), 'Checked with your approval.');
});

await check('sub-agents: tagged child parts, data-task frames, the answer is the parent\'s', async () => {
  const { message, errors } = await send('lead', 'chat-team', [user('team up')]);
  assert.deepEqual(errors, []);
  const tasks = message.parts.filter((p) => p.type === 'data-task');
  assert.equal(tasks.length, 3, 'one part per task, updated in place');
  const research = tasks.find((t) => t.data.taskName === 'research');
  assert.equal(research.data.subAgentKey, 'researcher');
  assert.equal(research.data.status, 'completed');
  assert.equal(research.data.toolId, 'call_team');
  const [haiku, broken] = tasks.filter((t) => t.data.subAgentKey === 'writer');
  assert.equal(haiku.data.status, 'completed');
  assert.equal(broken.data.status, 'failed');
  assert.ok(broken.data.error.message.length > 0);
  // Interleaved children: each one's text is its own, whole.
  assert.equal(childText(message, research.data.taskId), 'Sunny in Paris.');
  assert.equal(childText(message, haiku.data.taskId), 'Soft rain falls.');
  const weather = message.parts.find((p) => p.type === 'dynamic-tool' && p.toolName === 'mock_city_weather');
  assert.equal(taskOf(weather), research.data.taskId);
  assert.equal(weather.state, 'output-available');
  const invoke = message.parts.find((p) => p.type === 'dynamic-tool' && p.toolName === 'agent_invoke');
  assert.equal(invoke.state, 'output-available');
  assert.deepEqual(invoke.output.tasks.map((t) => t.status), ['completed', 'completed', 'failed']);
  assert.equal(taskOf(invoke), undefined, 'the parent\'s own call');
  assert.equal(parentText(message), 'Team done.');
});

await check('a sub-agent\'s approval is answered with addToolApprovalResponse through the root run', async () => {
  const first = [user('team guarded')];
  const { message } = await send('guarded_lead', 'chat-team-guarded', first);
  const call = message.parts.find((p) => p.type === 'dynamic-tool' && p.toolName === 'mock_city_weather');
  assert.ok(call, JSON.stringify(message.parts));
  assert.equal(call.state, 'approval-requested');
  const research = message.parts.find((p) => p.type === 'data-task' && p.data.taskName === 'research');
  assert.equal(taskOf(call), research.data.taskId);
  const answered = structuredClone(message);
  const part = answered.parts.find((p) => p.toolCallId === call.toolCallId);
  part.state = 'approval-responded';
  part.approval = { ...part.approval, approved: true };
  // useChat's automatic send fires: the children's step holds only settled calls.
  assert.equal(lastAssistantMessageIsCompleteWithApprovalResponses({ messages: [...first, answered] }), true);
  const { message: after, errors } = await send('guarded_lead', 'chat-team-guarded', [...first, answered], answered);
  assert.deepEqual(errors, []);
  const done = after.parts.find((p) => p.toolCallId === call.toolCallId);
  assert.equal(done.state, 'output-available');
  assert.ok(done.output.temperatureC !== undefined, JSON.stringify(done.output));
  assert.equal(childText(after, research.data.taskId), 'Checked with your approval.');
  const writer = after.parts.find((p) => p.type === 'data-task' && p.data.subAgentKey === 'writer');
  // The writer went on while the client decided: nothing of it is lost.
  assert.equal(childText(after, writer.data.taskId), 'Soft rain falls.');
  assert.equal(parentText(after), 'Team checked.');
  assert.equal(lastAssistantMessageIsCompleteWithApprovalResponses({ messages: [...first, after] }), false);
});

// The cited agent's answer (scenario.json "cite the chat"): the model's [cite:<id>] markers, one
// split across chunks, are gone from the text and are source parts instead.
const CITED_TEXT = 'Coral reported the translation bug . Mandy said voice input is off.';

await check('citations are source-document parts; the text has no marker', async () => {
  const { message, errors } = await send('cited', 'chat-cited', [user('cite the chat')]);
  assert.deepEqual(errors, []);
  assert.equal(text(message), CITED_TEXT);
  const sources = message.parts.filter((p) => p.type === 'source-document');
  assert.equal(message.parts.filter((p) => p.type === 'source-url').length, 0);
  // The text block the citation belongs to (the id of its text-* chunks: {runId}_c_{n}, the
  // message id being the run id), and the place in it.
  const contentId = sources[0]?.providerMetadata?.agw?.contentId;
  assert.ok(contentId?.startsWith(`${message.id}_c_`), JSON.stringify(sources));
  assert.deepEqual(
    sources.map((s) => [s.sourceId, s.title, s.mediaType]),
    [
      [`${contentId}:0`, 'Coral', 'text/plain'],
      [`${contentId}:1`, 'Mandy', 'text/plain'],
    ],
  );
  assert.deepEqual(sources[0].providerMetadata.agw, {
    contentId,
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
  const second = sources[1].providerMetadata.agw;
  assert.equal(second.messageId, '401');
  assert.equal(second.senderName, 'Mandy');
  assert.equal(second.offset, CITED_TEXT.length - 1);
  assert.equal(CITED_TEXT.slice(0, second.offset).endsWith('voice input is off'), true);
});

// The guarded agent (agents/revoked.json, the bundled rule set "demo"): a block after two text
// deltas is a data-agw-revoke part that names the text part to withdraw, then the run's error.
await check('a guard\'s revoke is a data-agw-revoke part naming the text part, then an error', async () => {
  const { message, errors } = await send('revoked', 'chat-revoked', [user('say something dangerous')]);
  const textPart = message.parts.find((p) => p.type === 'text');
  assert.equal(textPart.text, 'Here is the nerve ');
  const revoke = message.parts.find((p) => p.type === 'data-agw-revoke');
  assert.ok(revoke, JSON.stringify(message.parts));
  assert.ok(revoke.id.startsWith(`${message.id}_c_`), revoke.id);
  assert.equal(revoke.data.contentId, revoke.id);
  assert.deepEqual(
    [revoke.data.stage, revoke.data.guard, revoke.data.rule, revoke.data.statusCode],
    ['output', 'rules:demo', 'forbidden-topic', -1006],
  );
  assert.equal(errors.length, 1);
  assert.match(String(errors[0].message ?? errors[0]), /guard/i);
});

await check('a guard\'s warning is a data-agw-warning part; the answer goes on', async () => {
  const { message, errors } = await send('revoked', 'chat-warned', [user('about the dosage')]);
  assert.deepEqual(errors, []);
  assert.equal(text(message), 'Take the usual dosage and rest.');
  const warning = message.parts.find((p) => p.type === 'data-agw-warning');
  assert.ok(warning, JSON.stringify(message.parts));
  assert.deepEqual([warning.data.rule, warning.data.statusCode], ['medical-advice', -1007]);
});

await check('an error arrives as an error chunk', async () => {
  const { errors } = await send('plain', 'chat-break', [user('break please')]);
  assert.equal(errors.length, 1);
  assert.match(String(errors[0].message ?? errors[0]), /provider|scripted|400/i);
});

await check('resume with nothing running is 204 (no stream)', async () => {
  const transport = new DefaultChatTransport({ api: `${BASE}/api/ai-sdk/plain/chat` });
  const stream = await transport.reconnectToStream({ chatId: 'chat-plain' });
  assert.equal(stream, null);
});

console.log(`ai-sdk: ${passed} passed`);
