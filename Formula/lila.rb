# Homebrew formula for lila. Install from a tap:
#   brew install lila-lb/tap/lila
# scripts/formula.js rewrites url and sha256 for a release from `npm pack`.
class Lila < Formula
  desc "Load balancer you start in one line: one Node.js file, zero dependencies"
  homepage "https://github.com/lila-lb/lila"
  url "https://registry.npmjs.org/lila-lb/-/lila-lb-0.1.0.tgz"
  sha256 "107a1f70761ffed8f8a3ccc5968566699472d10a0df920cbc39e98fff81d4ee5"
  license "MIT"

  depends_on "node"

  def install
    system "npm", "install", *std_npm_args
    bin.install_symlink Dir["#{libexec}/bin/*"]
  end

  test do
    assert_match "lila #{version}", shell_output("#{bin}/lila --version")
  end
end
