// The AI SDK's `useChat` hook itself (`@ai-sdk/react`, rendered in Node by react-test-renderer)
// against agw, with the documented automatic sends: `sendAutomaticallyWhen:
// lastAssistantMessageIsCompleteWithToolCalls` for a frontend tool answered by `addToolOutput`,
// `lastAssistantMessageIsCompleteWithApprovalResponses` for a tool approval answered by
// `addToolApprovalResponse`. The hook must post the answer once and then stay quiet: issue 32
// found it posting the tool output a second time (409 `not_waiting`) because the continuation
// stream put the next model turn in the same step as the tool output.
// Run by run.sh against a running agw (AGW_BASE). Each check prints one line; a failure throws.
import assert from 'node:assert/strict';
import React, { act } from 'react';
import TestRenderer from 'react-test-renderer';
import { useChat } from '@ai-sdk/react';
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';

const BASE = process.env.AGW_BASE;
// React's test environment flag: state updates are flushed inside `act`.
globalThis.IS_REACT_ACT_ENVIRONMENT = true;
// react-test-renderer still works on React 19 but says on every render that it is deprecated;
// that one line is dropped, every other message is kept.
const consoleError = console.error;
console.error = (...args) => {
  if (typeof args[0] === 'string' && args[0].startsWith('react-test-renderer is deprecated')) return;
  consoleError(...args);
};

let passed = 0;

async function check(name, fn) {
  await fn();
  passed += 1;
  console.log(`ok   ai-sdk useChat: ${name}`);
}

/**
 * Renders a component that calls `useChat` for agent `agent` and chat `id`, with `when` as
 * `sendAutomaticallyWhen`. Returns the hook's latest value, every POST the transport made (with
 * its status) and every automatic-send decision the hook asked for (with its answer).
 */
async function renderChat(agent, id, when) {
  const posts = [];
  const decisions = [];
  const transport = new DefaultChatTransport({
    api: `${BASE}/api/ai-sdk/${agent}/chat`,
    fetch: async (input, init) => {
      const response = await fetch(input, init);
      posts.push({ method: init?.method ?? 'GET', status: response.status });
      return response;
    },
  });
  const view = { chat: undefined, posts, decisions };
  function Probe() {
    view.chat = useChat({
      id,
      transport,
      sendAutomaticallyWhen: (options) => {
        const send = when(options);
        decisions.push(send);
        return send;
      },
    });
    return null;
  }
  let renderer;
  await act(async () => {
    renderer = TestRenderer.create(React.createElement(Probe));
  });
  view.unmount = () => act(async () => renderer.unmount());
  return view;
}

/** Lets the hook work until `ready(view)` holds; fails after 10 s naming `what`. */
async function until(view, ready, what) {
  const deadline = Date.now() + 10_000;
  while (!ready(view)) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}: status ${view.chat.status}, posts ${JSON.stringify(view.posts)}, ` +
        `decisions ${JSON.stringify(view.decisions)}, messages ${JSON.stringify(view.chat.messages)}`);
    }
    await act(async () => {
      await new Promise((resolve) => setTimeout(resolve, 10));
    });
  }
}

const assistant = (view) => view.chat.messages.at(-1);
const text = (message) => message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
const settled = (view) => view.chat.status === 'ready' || view.chat.status === 'error';

/** After the answer was posted: the hook decided about the continuation and is idle again. */
async function assertOneContinuation(view, expectedText) {
  // Decisions: after the first stream (no), on the answer (yes), after the continuation.
  await until(view, (v) => v.decisions.length >= 3 && settled(v), 'the decision after the continuation');
  assert.deepEqual(view.decisions, [false, true, false], 'the continuation is complete: nothing to send again');
  assert.equal(view.chat.error, undefined, String(view.chat.error));
  assert.equal(view.chat.status, 'ready');
  assert.deepEqual(view.posts, [
    { method: 'POST', status: 200 },
    { method: 'POST', status: 200 },
  ], 'one POST for the question, one for the answer, no second answer (409 not_waiting)');
  assert.equal(text(assistant(view)), expectedText);
  const steps = assistant(view).parts.filter((p) => p.type === 'step-start').length;
  assert.equal(steps, 2, 'the tool call and the answer after it are two steps');
}

await check('a frontend tool answered with addToolOutput is posted once (sendAutomaticallyWhen)', async () => {
  const view = await renderChat('tools', 'use-chat-ask', lastAssistantMessageIsCompleteWithToolCalls);
  await act(async () => {
    await view.chat.sendMessage({ text: 'ask me' });
  });
  const call = () => assistant(view)?.parts.find((p) => p.type === 'tool-confirm_dialog');
  await until(view, (v) => settled(v) && v.decisions.length >= 1 && call(), 'the frontend call');
  assert.equal(call().state, 'input-available');
  assert.deepEqual(view.decisions, [false], 'nothing to send while the call has no output');
  await act(async () => {
    await view.chat.addToolOutput({
      tool: 'confirm_dialog',
      toolCallId: call().toolCallId,
      output: { selectedOption: 'Yes', selectedIndex: 0 },
    });
  });
  await assertOneContinuation(view, 'You chose.');
  assert.equal(call().state, 'output-available');
  await view.unmount();
});

await check('a tool approval answered with addToolApprovalResponse is posted once (sendAutomaticallyWhen)', async () => {
  const view = await renderChat('guarded', 'use-chat-guarded', lastAssistantMessageIsCompleteWithApprovalResponses);
  await act(async () => {
    await view.chat.sendMessage({ text: 'guarded forecast' });
  });
  const call = () => assistant(view)?.parts.find((p) => p.type === 'dynamic-tool');
  await until(view, (v) => settled(v) && v.decisions.length >= 1 && call()?.state === 'approval-requested',
    'the approval request');
  await act(async () => {
    await view.chat.addToolApprovalResponse({ id: call().approval.id, approved: true });
  });
  await assertOneContinuation(view, 'Checked with your approval.');
  assert.equal(call().state, 'output-available');
  await view.unmount();
});

console.log(`ai-sdk useChat: ${passed} passed`);
