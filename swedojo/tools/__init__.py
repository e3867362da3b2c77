"""Typed, fingerprinted tools and strict tool-call parsing: the only way an agent acts on a sandbox.

    registry = ToolSetConfig().build("swe")             # the tools of a named set
    fmt = get_format("glm")                              # glm | openai | react
    system = fmt.render_tools(registry.specs())          # prompt section listing the tools
    parsed = fmt.parse(model_text, registry.specs())     # calls + format errors; never raises
    results = [registry.dispatch(c, sandbox, ctx) for c in parsed.calls]  # invalid calls never run
    observation = fmt.render_observation(results, parsed.errors)

`registry.fingerprints()` and `registry.fingerprint` go into the trajectory;
`registry.check_replay(recorded)` refuses to replay one recorded with other tools.
"""
