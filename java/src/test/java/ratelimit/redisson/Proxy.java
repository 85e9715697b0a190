package ratelimit.redisson;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;

/**
 * A TCP proxy in front of a server that can hold back the server's replies, then let them through
 * or drop every connection without delivering them: a reply the client reads only after its
 * caller gave up, or a connection lost just after the server sent a reply the client never read,
 * which no timing of a CLIENT KILL can produce reliably.
 */
final class Proxy implements AutoCloseable {
    private final ServerSocket listener;
    private final int target;
    private final List<Socket> open = new ArrayList<>();
    private boolean holding;

    Proxy(int target) throws IOException {
        this.target = target;
        listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(this::accept, "proxy-accept");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    String address() {
        return "redis://127.0.0.1:" + listener.getLocalPort();
    }

    /** From now on, replies wait in the proxy until {@link #dropAll}. */
    synchronized void hold() {
        holding = true;
    }

    /** Lets the replies held (and those to come) through, in order, on their connections. */
    synchronized void release() {
        holding = false;
        notifyAll();
    }

    /** Closes every connection open now, discarding the replies held; new ones pass freely. */
    synchronized void dropAll() {
        for (Socket s : open) {
            try {
                s.close();
            } catch (IOException e) {
                // closing anyway
            }
        }
        open.clear();
        holding = false;
        notifyAll();
    }

    private void accept() {
        while (!listener.isClosed()) {
            try {
                Socket client = listener.accept();
                Socket server = new Socket(InetAddress.getLoopbackAddress(), target);
                synchronized (this) {
                    open.add(client);
                    open.add(server);
                }
                pump(client, server, false);
                pump(server, client, true);
            } catch (IOException e) {
                return; // closed
            }
        }
    }

    private void pump(Socket from, Socket to, boolean replies) {
        Thread t = new Thread(() -> {
            byte[] buffer = new byte[16 * 1024];
            try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                int n;
                while ((n = in.read(buffer)) >= 0) {
                    if (replies && !pass(to)) {
                        return;
                    }
                    out.write(buffer, 0, n);
                    out.flush();
                }
            } catch (IOException e) {
                // one side closed: close the other
            } finally {
                try {
                    to.close();
                } catch (IOException e) {
                    // already closed
                }
            }
        }, "proxy-pump");
        t.setDaemon(true);
        t.start();
    }

    /** Waits while replies are held; false if the connection was dropped meanwhile. */
    private synchronized boolean pass(Socket to) {
        while (holding && !to.isClosed()) {
            try {
                wait();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return !to.isClosed();
    }

    @Override
    public void close() throws IOException {
        listener.close();
        dropAll();
    }
}
