"""Adapters between actrone_pg and the frameworks agents run in; each needs its own extra.

- ``actrone_pg.integrations.mcp``: a Model Context Protocol server (``[mcp]``), also run by
  ``actrone-pg mcp``.
- ``actrone_pg.integrations.langgraph``: ``ActroneStore``, LangGraph's ``BaseStore`` over an
  agent's long-term memories (``[langgraph]``).
- ``actrone_pg.integrations.langchain``: ``ActroneChatMessageHistory``, a LangChain chat history
  over L1 (``[langchain]``).
- ``actrone_pg.integrations.openai_agents``: ``ActroneSession``, the OpenAI Agents SDK's
  ``Session`` over L1 (``[openai-agents]``).
- ``actrone_pg.integrations.llamaindex``: ``ActroneMemoryBlock``, a LlamaIndex memory block
  filled by ``retrieve_context`` (``[llamaindex]``).

Each module imports its framework when imported itself, and a missing extra fails with the exact
``pip install "actrone-pg[extra]"`` line.
"""
