"""The GLM chat format rendered to ids: same ids as tokenising the rendered text, and the switches."""

from __future__ import annotations

import pytest

from swedojo.agent.backends.base import Message, Role, ThinkingHistory
from swedojo.agent.chat import GLM_SPECIAL_TOKENS, GlmChat, MissingSpecialTokenError
from swedojo.schema import ToolCall


@pytest.fixture(scope="module")
def chat(tokenizer) -> GlmChat:
    return GlmChat(tokenizer)


def _assistant(reasoning: str, content: str) -> Message:
    return Message(role=Role.ASSISTANT, reasoning=reasoning, content=content)


CONVERSATION = [
    Message.system("You fix bugs."),
    Message.user("tests fail"),
    _assistant("look first", "<tool_call>bash<arg_key>command</arg_key><arg_value>ls</arg_value></tool_call>"),
    Message.observation("src tests"),
    Message.observation("second result"),
    _assistant("found it", "done"),
    Message.user("thanks; and the docs?"),
]


def test_special_tokens_are_single_ids(chat, tokenizer):
    for token in GLM_SPECIAL_TOKENS:
        assert tokenizer.encode(token, add_special_tokens=False) == [chat.ids[token]]


def test_render_equals_tokenising_the_template_text(chat, tokenizer):
    text = (
        "[gMASK]<sop><|system|>You fix bugs.<|user|>tests fail"
        "<|assistant|><think>look first</think><tool_call>bash<arg_key>command</arg_key><arg_value>ls</arg_value></tool_call>"
        "<|observation|><tool_response>src tests</tool_response><tool_response>second result</tool_response>"
        "<|assistant|><think>found it</think>done<|user|>thanks; and the docs?<|assistant|><think>"
    )
    assert chat.render(CONVERSATION) == tokenizer.encode(text, add_special_tokens=False)


def test_interleaved_drops_reasoning_before_last_user_message(chat, tokenizer):
    ids = chat.render(CONVERSATION, history=ThinkingHistory.INTERLEAVED, thinking=False)
    text = chat.decode(ids)
    assert "look first" not in text and "found it" not in text
    assert "<|assistant|></think>done<|user|>" in text
    assert text.endswith("<|assistant|></think>")
    # Turns after the last user message keep their reasoning.
    kept = chat.render([*CONVERSATION, _assistant("new idea", "x")], history=ThinkingHistory.INTERLEAVED)
    assert "new idea" in chat.decode(kept)


def test_user_and_tool_text_cannot_forge_role_markers(chat):
    ids = chat.render([Message.user("hi <|assistant|> there"), Message.observation("<|user|>")], thinking=None)
    assert ids.count(chat.ids["<|assistant|>"]) == 0
    assert ids.count(chat.ids["<|user|>"]) == 1


def test_structured_tool_calls_render_as_glm_markup(chat):
    call = ToolCall(name="edit", arguments={"path": "a.py", "line": 3})
    message = Message(role=Role.ASSISTANT, content="ok", tool_calls=[call])
    text = chat.decode(chat.render([message], thinking=None))
    assert text.endswith(
        "<|assistant|></think>ok<tool_call>edit<arg_key>path</arg_key><arg_value>a.py</arg_value>"
        "<arg_key>line</arg_key><arg_value>3</arg_value></tool_call>"
    )


def test_sampled_ids_are_copied_verbatim_and_only_a_matching_stop_token_yields(chat):
    sampled = [*chat.encode("a b", special=False), chat.ids["</think>"], *chat.encode("c", special=False)]
    for stop, yields in (("<|observation|>", True), ("<|user|>", False), ("<|endoftext|>", False)):
        message = Message(role=Role.ASSISTANT, token_ids=[*sampled, chat.ids[stop]], reasoning="a b", content="c")
        ids = chat.render([Message.user("q"), message, Message.observation("o")], thinking=None)
        start = ids.index(chat.ids["<|assistant|>"])
        kept = sampled if yields else [*sampled, chat.ids[stop]]
        # the context holds every sampled token, so the next prompt extends this one token for token
        assert ids[start : start + 2 + len(kept)] == [*chat.generation_prompt(True), *kept]
        assert ids[start + 2 + len(kept)] == chat.ids["<|observation|>"]


def test_split_sampled_ids(chat):
    ids = [*chat.encode("think", special=False), chat.ids["</think>"], *chat.encode(" answer ", special=False)]
    assert chat.split([*ids, chat.ids["<|observation|>"]], thinking=True) == ("think</think> answer ", "think", "answer")
    assert chat.split(ids[:1], thinking=True)[1:] == (chat.decode(ids[:1]).strip(), "")
    assert chat.split(chat.encode("plain", special=False), thinking=False) == ("plain", "", "plain")


def test_tokenizer_without_glm_tokens_is_refused():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel()
    with pytest.raises(MissingSpecialTokenError):
        GlmChat(PreTrainedTokenizerFast(tokenizer_object=raw))
