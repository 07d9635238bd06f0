// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
