"""cuda_library: compiles .cu files with nvcc and returns a CcInfo that cc_* rules can depend on.

Bazel 4.2.3 has no CUDA support; this rule calls nvcc once per .cu (host compiler: the C
toolchain's gcc), archives the objects with the toolchain's ar and links cudart statically
(`-lcudart_static`), so a binary built here runs on a GPU machine that has a driver but no
toolkit. Code for sm_90 (H100, H200) plus compute_90 PTX, which newer GPUs JIT-compile.

The toolkit lives outside the workspace at a fixed path (CUDA_HOME below). Targets of this
rule need it, so they are tagged "manual" and reached only under --config=cuda (see
cuda/BUILD.bazel): a plain `bazel build //...` on a machine without nvcc never runs it.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

CUDA_HOME = "/usr/local/cuda"

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-lineinfo",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
    "-Xcompiler=-fPIC,-fvisibility=hidden,-Wall,-Wextra",
    "-Werror=all-warnings",
    "-D_GNU_SOURCE",
]

CUDA_LINKOPTS = [
    "-L" + CUDA_HOME + "/lib64",
    "-lcudart_static",
    "-ldl",
    "-lpthread",
    "-lrt",
]

def _include_flags(cc_ctx, bin_dir):
    flags = ["-I.", "-I" + bin_dir]
    for d in cc_ctx.includes.to_list():
        flags.append("-I" + d)
    for d in cc_ctx.quote_includes.to_list():
        flags.append("-I" + d)  # nvcc has no -iquote
    for d in cc_ctx.system_includes.to_list():
        flags += ["-isystem", d]
    for d in cc_ctx.defines.to_list():
        flags.append("-D" + d)
    return flags

def _cuda_library_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    dep_infos = [d[CcInfo] for d in ctx.attr.deps]
    dep_ctx = cc_common.merge_cc_infos(cc_infos = dep_infos).compilation_context
    headers = depset(ctx.files.hdrs, transitive = [dep_ctx.headers])
    common = (["-ccbin", cc_toolchain.compiler_executable] + NVCC_FLAGS +
              _include_flags(dep_ctx, ctx.bin_dir.path) + ctx.attr.copts)

    objects = []
    for src in ctx.files.srcs:
        stem = src.basename[:-len(src.extension) - 1]
        obj = ctx.actions.declare_file("_objs/%s/%s.o" % (ctx.label.name, stem))
        ctx.actions.run(
            executable = CUDA_HOME + "/bin/nvcc",
            arguments = common + ["-c", src.path, "-o", obj.path],
            inputs = depset([src], transitive = [headers]),
            outputs = [obj],
            mnemonic = "NvccCompile",
            progress_message = "nvcc %s" % src.short_path,
            use_default_shell_env = True,
        )
        objects.append(obj)

    # The .pic.a suffix lets //:libpccl_static pick the archive up like Bazel's own.
    archive = ctx.actions.declare_file("lib%s.pic.a" % ctx.label.name)
    ctx.actions.run(
        executable = cc_toolchain.ar_executable,
        arguments = ["rcsD", archive.path] + [o.path for o in objects],
        inputs = objects,
        outputs = [archive],
        mnemonic = "NvccArchive",
        progress_message = "ar %s" % archive.short_path,
        use_default_shell_env = True,
    )

    library = cc_common.create_library_to_link(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        static_library = archive,
        pic_static_library = archive,
        alwayslink = ctx.attr.alwayslink,
    )
    linker_input = cc_common.create_linker_input(
        owner = ctx.label,
        libraries = depset([library]),
        user_link_flags = depset(CUDA_LINKOPTS),
    )
    own = CcInfo(
        compilation_context = cc_common.create_compilation_context(headers = depset(ctx.files.hdrs)),
        linking_context = cc_common.create_linking_context(linker_inputs = depset([linker_input])),
    )
    return [
        DefaultInfo(files = depset([archive])),
        cc_common.merge_cc_infos(direct_cc_infos = [own], cc_infos = dep_infos),
    ]

cuda_library = rule(
    implementation = _cuda_library_impl,
    doc = "Compiles .cu sources with nvcc into a static archive usable as a cc dependency.",
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(doc = "Extra nvcc flags."),
        "alwayslink": attr.bool(default = False),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    incompatible_use_toolchain_transition = True,
)
