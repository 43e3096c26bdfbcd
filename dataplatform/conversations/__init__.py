"""Chat conversations, one model for every workflow (DESIGN.md section 3a; docs/conversations.md):

- `model`: messages with reasoning, tool calls and tool results, and the tools offered;
- `reading`: messages as real files spell them, read into the model with a problem per field;
- `readers/`: agent traces (OpenAI tool calling, SWE-agent, OpenHands, the SWE Labeler's) into the model;
- `templates/`: response templates that render a conversation into token ids and parse a model's
  answer back, with the channel of every token;
- `training`: the rows exports write (TRL's conversational shape, a `tools` column);
- `validation`: the older check of plain `{role, content}` lists, for importers that take only text.
"""
