package com.github.nexmark.flink.udf;

import org.apache.flink.table.functions.ScalarFunction;

/**
 * Nexmark q14's count_char for benchmarks.peers: how often the first character of
 * {@code c} occurs in {@code s} (0 for a NULL s). A class of the name Flink's q14 text
 * declares, written here: the Nexmark project's jar is built with Maven, out of reach on
 * this machine. benchmarks/peers.py compiles it with javac against PyFlink's jars.
 */
public class CountChar extends ScalarFunction {
    public long eval(String s, String c) {
        if (s == null || c == null || c.isEmpty()) {
            return 0L;
        }
        char want = c.charAt(0);
        long n = 0;
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) == want) {
                n++;
            }
        }
        return n;
    }
}
