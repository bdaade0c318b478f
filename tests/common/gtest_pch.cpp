// The object strata_gtest_pch compiles: its precompiled header is what test targets reuse.
