// The phase stream (issue 35), read the way its design's client guide reads it: fetch, the
// body's reader, a TextDecoder, each chunk split on '\n' (the unfinished tail kept for the next
// chunk), blank lines skipped, each line JSON.parse'd and dispatched on its `type` to a callback.
// No client library exists for this protocol: the parser (phase_parser.mjs) is the guide's
// shape, nothing more. Run by run.sh against a running agw (AGW_BASE).
import assert from 'node:assert/strict';
import { PhaseStreamParser } from './phase_parser.mjs';

const BASE = process.env.AGW_BASE;
let passed = 0;

async function check(name, fn) {
  await fn();
  passed += 1;
  console.log(`ok   phase: ${name}`);
}

function post(path, body, headers = {}) {
  return fetch(`${BASE}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

await check('a whole REACT run with a tool call', async () => {
  const tools = [];
  let done;
  let error;
  const parser = new PhaseStreamParser({
    onToolStart: (d) => tools.push(['start', d.toolName, d.params]),
    onToolEnd: (d) => tools.push(['end', d.toolName, d.success]),
    onDone: (d) => { done = d; },
    onError: (d) => { error = d; },
  });
  const response = await post('/api/phase/tools', {
    chatId: 'phase-weather',
    messages: [{ role: 'user', content: 'weather in Paris' }],
    options: { showThinking: false, showToolCalls: true, detailedCitations: true },
  }, { 'user-id': 'node-user', 'device-id': 'node-device' });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'text/event-stream');
  const runId = response.headers.get('x-agw-run-id');
  const chatId = response.headers.get('x-agw-chat-id');
  assert.ok(runId && chatId);
  await parser.consume(response);
  assert.deepEqual(parser.phases, ['thinking', 'tool_calling', 'generating', 'completed']);
  assert.deepEqual(tools, [
    ['start', 'mock_city_weather', { city: 'Paris' }],
    ['end', 'mock_city_weather', true],
  ]);
  assert.equal(parser.text, 'Sunny in Paris.');
  assert.equal(error, undefined);
  assert.equal(done.finishReason, 'stop');
  assert.equal(done.stats.iterations, 2);
  assert.ok(Number.isInteger(done.stats.totalTokens));
  for (const line of parser.lines) {
    assert.deepEqual(Object.keys(line), ['type', 'phase', 'data']);
  }
  // The native chat API replays what this protocol wrote, with the client's ids.
  const chat = await (await fetch(`${BASE}/api/ap/chat?chatId=${chatId}`)).json();
  const query = chat.data.events.find((e) => e.type === 'request.query');
  assert.deepEqual(query.params, { userId: 'node-user', deviceId: 'node-device' });
  assert.ok(chat.data.events.some((e) => e.type === 'run.complete' && e.runId === runId));
});

await check('the switches: tool calls hidden', async () => {
  const parser = new PhaseStreamParser();
  const response = await post('/api/phase/tools', {
    messages: [{ role: 'user', content: 'weather in Paris' }],
    options: { showToolCalls: false },
  });
  await parser.consume(response);
  assert.deepEqual(parser.phases, ['thinking', 'tool_calling', 'generating', 'completed']);
  assert.ok(!parser.lines.some((l) => l.type.startsWith('tool_')));
});

await check('thinking shown with showThinking', async () => {
  const thoughts = [];
  const parser = new PhaseStreamParser({ onThinking: (c) => thoughts.push(c) });
  await parser.consume(await post('/api/phase/plain', {
    messages: [{ role: 'user', content: 'think first' }],
    options: { showThinking: true, language: 'en' },
  }));
  assert.equal(thoughts.join(''), 'Let me think.');
  assert.equal(parser.text, '42');
  assert.equal(parser.lines[0].data.message, 'Analyzing your question...');
});

await check('a frontend tool: input_required, answered through the native submit', async () => {
  let submitted;
  const parser = new PhaseStreamParser({
    onOther: (event) => {
      if (event.type !== 'input_required') return;
      const { runId, toolId } = event.data;
      submitted = fetch(`${BASE}/api/ap/submit`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ runId, toolId, params: { choice: 'Yes' } }),
      }).then((r) => r.json());
    },
  });
  await parser.consume(await post('/api/phase/tools', { messages: [{ role: 'user', content: 'ask me' }] }));
  assert.equal((await submitted).data.accepted, true);
  assert.equal(parser.text, 'You chose.');
  assert.equal(parser.lines.at(-1).type, 'done');
});

await check('a provider failure ends with error', async () => {
  let error;
  const parser = new PhaseStreamParser({ onError: (d) => { error = d; } });
  await parser.consume(await post('/api/phase/plain', { messages: [{ role: 'user', content: 'break please' }] }));
  assert.equal(parser.phases.at(-1), 'error');
  assert.equal(error.code, 'provider_error');
  assert.equal(typeof error.recoverable, 'boolean');
});

// The guarded agent (agents/revoked.json): a block after two text lines is a revoke line that
// says which text to take back, then the error line.
await check('a guard\'s revoke takes the shown text back, then the error line', async () => {
  let revoke;
  let error;
  const parser = new PhaseStreamParser({ onRevoke: (d) => { revoke = d; }, onError: (d) => { error = d; } });
  await parser.consume(await post('/api/phase/revoked', { messages: [{ role: 'user', content: 'say something dangerous' }] }));
  assert.ok(revoke, JSON.stringify(parser.lines));
  assert.deepEqual([revoke.offset, revoke.length], [0, 'Here is the nerve '.length]);
  assert.deepEqual([revoke.guard, revoke.rule, revoke.statusCode], ['rules:demo', 'forbidden-topic', -1006]);
  assert.equal(parser.text, '', 'nothing of the withdrawn answer stays shown');
  assert.equal(error.code, 'guardrail_blocked');
  assert.equal(parser.phases.at(-1), 'error');
});

await check('a guard\'s warning line leaves the answer whole', async () => {
  let warning;
  const parser = new PhaseStreamParser({ onWarning: (d) => { warning = d; } });
  await parser.consume(await post('/api/phase/revoked', { messages: [{ role: 'user', content: 'about the dosage' }] }));
  assert.equal(parser.text, 'Take the usual dosage and rest.');
  assert.deepEqual([warning.rule, warning.statusCode], ['medical-advice', -1007]);
  assert.equal(parser.phases.at(-1), 'completed');
});

console.log(`phase: ${passed} passed`);
