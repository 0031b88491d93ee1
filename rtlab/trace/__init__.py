# SPDX-License-Identifier: MIT
"""Spike attribution from ordinary kernel tracepoints (see docs/tracing.md).

`tracefs.Recorder` records into an own trace instance, `capture.TraceCapture`
holds the raw pages, `attribution.attribute_run` explains every spike.
"""
