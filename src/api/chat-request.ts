// A chat completion body → the conversation the model's chat template receives (ChatRequest):
// messages with their tool calls and tool results, the tools, the tool choice (a named function
// becomes "required" over that function alone, which its grammar then forces), the template's
// variables. Combinations this server does not serve are a 400 naming them.

import { ApiError } from './errors.ts';
import type { ChatCompletionBody } from './schemas.ts';
import { messageText } from './schemas.ts';
import type { ChatRequest, ChatTool, Tokenizer } from '../engine/tokenizer.ts';

export function chatRequest(b: ChatCompletionBody, tokenizer: Tokenizer): ChatRequest {
  const messages = b.messages.map((m, i) => {
    const calls = m.tool_calls ?? [];
    if (m.content == null && !(m.role === 'assistant' && calls.length > 0)) {
      throw new ApiError('missing_field', `Missing required parameter: 'messages.${i}.content' (only an assistant message with tool_calls may omit it).`, { param: `messages.${i}.content` });
    }
    if (calls.length > 0 && m.role !== 'assistant') {
      throw new ApiError('invalid_value', `messages.${i}: only assistant messages carry tool_calls (this one is '${m.role}').`, { param: `messages.${i}.tool_calls` });
    }
    return {
      role: m.role,
      content: messageText(m.content),
      ...(calls.length > 0 ? { toolCalls: calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) } : {}),
      ...(m.tool_call_id != null ? { toolCallId: m.tool_call_id } : {}),
      ...(m.name !== undefined ? { name: m.name } : {}),
      ...(m.reasoning_content != null ? { reasoningContent: m.reasoning_content } : {}),
    };
  });
  let tools: ChatTool[] = (b.tools ?? []).map((t) => ({
    name: t.function.name,
    ...(t.function.description != null ? { description: t.function.description } : {}),
    ...(t.function.parameters != null ? { parameters: t.function.parameters } : {}),
  }));
  let toolChoice: ChatRequest['toolChoice'];
  const choice = b.tool_choice;
  if (choice != null && typeof choice === 'object') {
    const named = tools.find((t) => t.name === choice.function.name);
    if (named === undefined) {
      throw new ApiError('invalid_value', `tool_choice names the function '${choice.function.name.slice(0, 64)}', which is not in tools.`, { param: 'tool_choice' });
    }
    tools = [named];
    toolChoice = 'required';
  } else if (choice != null) {
    toolChoice = choice;
  }
  if (toolChoice === 'required' && tools.length === 0) {
    throw new ApiError('invalid_value', 'tool_choice "required" needs at least one tool in tools.', { param: 'tool_choice' });
  }
  const calling = tools.length > 0 && toolChoice !== 'none';
  if (calling) {
    if (tokenizer.openChatParser === undefined) {
      throw new ApiError('unsupported_value', 'tools are not supported by the mock runner (it has no chat template or grammar sampler); serve a model with --runner llama.', { param: 'tools' });
    }
    if (b.response_format != null && b.response_format.type !== 'text') {
      throw new ApiError('unsupported_value', 'tools cannot be combined with response_format on this server; send one or the other.', { param: 'response_format' });
    }
    if (b.logprobs === true) {
      throw new ApiError('unsupported_value', 'logprobs cannot be combined with tools on this server.', { param: 'logprobs' });
    }
    if (b.ignore_eos === true) {
      throw new ApiError('invalid_value', 'tools cannot be combined with ignore_eos: a tool call ends at the end-of-turn token.', { param: 'ignore_eos' });
    }
  }
  const kwargs = b.chat_template_kwargs;
  if (kwargs != null && 'enable_thinking' in kwargs && typeof kwargs['enable_thinking'] !== 'boolean') {
    throw new ApiError('invalid_value', 'chat_template_kwargs.enable_thinking must be a boolean.', { param: 'chat_template_kwargs.enable_thinking' });
  }
  return {
    messages,
    ...(tools.length > 0 ? { tools } : {}),
    ...(toolChoice !== undefined ? { toolChoice } : {}),
    ...(b.parallel_tool_calls != null ? { parallelToolCalls: b.parallel_tool_calls } : {}),
    ...(kwargs != null && Object.keys(kwargs).length > 0 ? { templateKwargs: kwargs } : {}),
    ...(b.reasoning_effort != null ? { reasoningEffort: b.reasoning_effort } : {}),
  };
}
