//! Video readers for the CLI: y4m and raw `.yuv`.
