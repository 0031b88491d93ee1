# SPDX-License-Identifier: MIT
"""Spike attribution from ordinary kernel tracepoints (see docs/tracing.md).

The engine records into a trace instance of its own (`rtlab-probe ... --trace-dir`),
`capture.TraceCapture` loads the raw pages it wrote, `attribution.attribute_run`
explains every spike.
"""
