#pragma once

// Everything an embedding application needs.
#include <floodgate/decision.h>
#include <floodgate/limiter.h>
#include <floodgate/memory_store.h>
#include <floodgate/multi.h>
#include <floodgate/policy.h>
#include <floodgate/store.h>
#include <floodgate/time.h>
#include <floodgate/version.h>
