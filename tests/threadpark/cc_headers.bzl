"""cc_headers: the headers of cc_library targets as plain files, for tests that compile by hand."""

def _cc_headers_impl(ctx):
    hdrs = depset(transitive = [d[CcInfo].compilation_context.headers for d in ctx.attr.deps])
    return [DefaultInfo(files = hdrs, runfiles = ctx.runfiles(transitive_files = hdrs))]

cc_headers = rule(
    implementation = _cc_headers_impl,
    attrs = {"deps": attr.label_list(providers = [CcInfo])},
)
