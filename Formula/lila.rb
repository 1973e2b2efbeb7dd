# Homebrew formula for lila. Install from the tap (the repository
# github.com/lila-lb/homebrew-tap, which holds a copy of this file per release):
#   brew install lila-lb/tap/lila
# url and sha256 describe `npm pack` of the tree this file is in: `npm run build`
# rewrites them (scripts/formula.js), and CI fails when they do not.
class Lila < Formula
  desc "Load balancer you start in one line: one Node.js file, zero dependencies"
  homepage "https://github.com/lila-lb/lila"
  url "https://registry.npmjs.org/lila-lb/-/lila-lb-0.1.0.tgz"
  sha256 "2857da1addcf5c315274323e6664132278ee6afbe70826dc04495c3978fa14fc"
  license "MIT"

  depends_on "node"

  def install
    system "npm", "install", *std_npm_args
    bin.install_symlink Dir["#{libexec}/bin/*"]
  end

  test do
    assert_match "lila #{version}", shell_output("#{bin}/lila --version")

    # A backend that greets, lila in front of it, one connection through lila.
    require "socket"
    backend = TCPServer.new("127.0.0.1", 0)
    greeter = Thread.new do
      loop do
        client = backend.accept
        client.write "hello from the backend\n"
        client.close
      end
    end
    port = free_port
    lila = spawn "#{bin}/lila", "rr", "127.0.0.1:#{backend.addr[1]}",
                 "--host", "127.0.0.1", "--port", port.to_s, "--check", "none"
    answer = nil
    50.times do
      answer = TCPSocket.new("127.0.0.1", port).read
      break
    rescue Errno::ECONNREFUSED
      sleep 0.1
    end
    assert_equal "hello from the backend\n", answer
  ensure
    Process.kill("TERM", lila) if lila
    greeter&.kill
  end
end
