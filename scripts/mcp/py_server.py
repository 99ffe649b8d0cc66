"""A third-party MCP server for scripts/mcp/run.sh, written with the official MCP Python SDK
(`MCPServer`, the SDK's FastMCP, renamed in mcp 2): agw starts it over stdio from the server file
run.sh writes into AGENT_MCP_EXTERNAL_DIR, and the `shouter` agent calls its tools."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("py", instructions="Small text and number tools for agw's MCP suite.")


@server.tool()
def shout(text: str) -> str:
    """Returns the text in upper case."""
    return text.upper()


@server.tool()
def add(a: float, b: float) -> float:
    """Adds two numbers."""
    return a + b


if __name__ == "__main__":
    server.run("stdio")
