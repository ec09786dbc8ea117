#!/bin/sh
# Spark 4 needs Java 17 or newer on the PATH (or JAVA_HOME).
JAVA=java
if [ -n "$JAVA_HOME" ] && [ -x "$JAVA_HOME/bin/java" ]; then JAVA="$JAVA_HOME/bin/java"; fi
if ! command -v "$JAVA" >/dev/null 2>&1; then
  echo "Java not found. Spark needs Java 17+: install it (Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless; macOS: brew install openjdk@17) and put it on PATH or set JAVA_HOME." >&2
  exit 1
fi
VER=$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
if [ -z "$VER" ] || [ "$VER" -lt 17 ]; then
  echo "Java $VER found at $(command -v "$JAVA"), but Spark 4 needs Java 17+. Install openjdk-17 and set JAVA_HOME to it." >&2
  exit 1
fi
echo "java $VER ok"
