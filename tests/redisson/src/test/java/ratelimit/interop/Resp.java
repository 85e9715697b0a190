package ratelimit.interop;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A minimal RESP2 client for the module's commands and for reading keys byte for byte.
 *
 * <p>Why not Redisson's own connection: the tests need to tell a nil reply (acquired) from an
 * integer (the wait), keep blocking RATELIMIT.ACQUIRE calls free of a client-side command timeout,
 * and read permit-log members as raw bytes. A blocking socket does all three in ~100 lines and
 * keeps the module side of every test independent of the Redisson code under comparison.
 *
 * <p>Replies: simple string and bulk string as {@code byte[]} ({@link #str} turns them into text),
 * integer as {@link Long}, array as {@code List<Object>}, nil as {@code null}, error as a thrown
 * {@link Error}.
 */
final class Resp implements Closeable {
    /** A Redis error reply; the message is the error line without the leading '-'. */
    static final class Error extends RuntimeException {
        Error(String message) {
            super(message);
        }
    }

    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;

    Resp(int port) {
        try {
            socket = new Socket();
            socket.connect(new InetSocketAddress("127.0.0.1", port), 5_000);
            socket.setTcpNoDelay(true);
            socket.setSoTimeout(60_000); // a hung server fails the test instead of hanging the run
            in = new BufferedInputStream(socket.getInputStream());
            out = new BufferedOutputStream(socket.getOutputStream());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Sends one command; arguments are byte[] or anything whose toString() is the argument. */
    synchronized Object call(Object... args) {
        try {
            out.write(('*' + Integer.toString(args.length) + "\r\n").getBytes(StandardCharsets.US_ASCII));
            for (Object arg : args) {
                byte[] bytes = arg instanceof byte[] b ? b : arg.toString().getBytes(StandardCharsets.UTF_8);
                out.write(('$' + Integer.toString(bytes.length) + "\r\n").getBytes(StandardCharsets.US_ASCII));
                out.write(bytes);
                out.write('\r');
                out.write('\n');
            }
            out.flush();
            return read();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The reply as text (bulk or simple string), or null for nil. */
    String text(Object... args) {
        return str(call(args));
    }

    /** The reply as an integer; fails on any other reply type. */
    long integer(Object... args) {
        Object reply = call(args);
        if (reply instanceof Long l) {
            return l;
        }
        throw new AssertionError("expected an integer reply to " + describe(args) + ", got " + show(reply));
    }

    static String str(Object reply) {
        if (reply == null) {
            return null;
        }
        if (reply instanceof byte[] b) {
            return new String(b, StandardCharsets.UTF_8);
        }
        return reply.toString();
    }

    /** A reply as a readable string for assertion messages. */
    static String show(Object reply) {
        if (reply instanceof List<?> list) {
            List<String> parts = new ArrayList<>();
            for (Object o : list) {
                parts.add(show(o));
            }
            return parts.toString();
        }
        return reply instanceof byte[] ? '"' + str(reply) + '"' : String.valueOf(reply);
    }

    private static String describe(Object... args) {
        List<String> parts = new ArrayList<>();
        for (Object a : args) {
            parts.add(a instanceof byte[] ? str(a) : a.toString());
        }
        return String.join(" ", parts);
    }

    private Object read() throws IOException {
        int type = in.read();
        if (type < 0) {
            throw new EOFException("connection closed by the server");
        }
        String line = line();
        switch (type) {
            case '+':
                return line.getBytes(StandardCharsets.UTF_8);
            case '-':
                throw new Error(line);
            case ':':
                return Long.parseLong(line);
            case '$': {
                int len = Integer.parseInt(line);
                if (len < 0) {
                    return null;
                }
                byte[] data = in.readNBytes(len);
                if (data.length != len || in.read() != '\r' || in.read() != '\n') {
                    throw new EOFException("truncated bulk string");
                }
                return data;
            }
            case '*': {
                int n = Integer.parseInt(line);
                if (n < 0) {
                    return null;
                }
                List<Object> items = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    try {
                        items.add(read());
                    } catch (Error e) {
                        items.add(e); // an error inside an array (EXEC) is an element, not a failure
                    }
                }
                return items;
            }
            default:
                throw new IOException("unexpected RESP type byte " + type);
        }
    }

    private String line() throws IOException {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int c;
        while ((c = in.read()) != '\r') {
            if (c < 0) {
                throw new EOFException("connection closed mid-reply");
            }
            buf.write(c);
        }
        if (in.read() != '\n') {
            throw new IOException("malformed line ending");
        }
        return buf.toString(StandardCharsets.UTF_8);
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing a socket we are done with: nothing left to do
        }
    }
}
