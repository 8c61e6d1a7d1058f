"""A small, real MCP server for the quickstart: a hardware store's inventory.

Written with the official ``mcp`` SDK (``MCPServer``). Every tool is deterministic (a fixed
catalogue, no clock, no randomness), so an eval over it grades the same way every time, and
bad input gives a tool error the model can read and correct (``isError`` results, not crashes).

Run it over stdio (what an eval's ``mcpServers: {store: {command: python, args: [server.py]}}``
does), or over streamable HTTP for a ``{url: http://127.0.0.1:PORT/mcp}`` server::

    python server.py                 # stdio
    python server.py --http 8765     # streamable HTTP on 127.0.0.1:8765, endpoint /mcp
"""

from __future__ import annotations

import argparse
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

CATALOGUE: dict[str, dict[str, Any]] = {
    "HAM-001": {"name": "Claw hammer", "category": "hand tools", "priceCents": 1899,
                "stock": {"north": 30, "south": 12}},
    "SCR-010": {"name": "Screwdriver set (10 pieces)", "category": "hand tools", "priceCents": 2450,
                "stock": {"north": 0, "south": 7}},
    "DRL-200": {"name": "Cordless drill 18V", "category": "power tools", "priceCents": 8999,
                "stock": {"north": 4, "south": 0}},
    "SAW-050": {"name": "Hand saw 500 mm", "category": "hand tools", "priceCents": 1575,
                "stock": {"north": 9, "south": 9}},
    "NLS-100": {"name": "Wood nails 50 mm (box of 100)", "category": "fasteners", "priceCents": 399,
                "stock": {"north": 120, "south": 85}},
}
WAREHOUSES = ("north", "south")

mcp = MCPServer(
    name="quickstart-store",
    instructions="Inventory of a small hardware store: search items, read one, check stock, quote an order.",
    log_level="WARNING",
)


def _item(sku: str) -> dict[str, Any]:
    item = CATALOGUE.get(sku.strip().upper())
    if item is None:
        raise ToolError(f"unknown SKU {sku!r}; search_items lists the SKUs")
    return item


@mcp.tool()
def search_items(query: str) -> dict[str, Any]:
    """Find items whose name or category contains the query (case-insensitive).

    Returns the matching SKUs and names, sorted by SKU.
    """
    q = query.strip().lower()
    if not q:
        raise ToolError("query must not be empty")
    matches = [
        {"sku": sku, "name": item["name"]}
        for sku, item in sorted(CATALOGUE.items())
        if q in item["name"].lower() or q in item["category"].lower()
    ]
    return {"query": query, "matches": matches}


@mcp.tool()
def get_item(sku: str) -> dict[str, Any]:
    """Details of one item: name, category and unit price in cents."""
    item = _item(sku)
    return {"sku": sku.strip().upper(), "name": item["name"], "category": item["category"],
            "priceCents": item["priceCents"]}


@mcp.tool()
def check_stock(sku: str, warehouse: str | None = None) -> dict[str, Any]:
    """Units in stock for an item: in one warehouse (north or south), or in all of them with a total."""
    item = _item(sku)
    if warehouse is not None:
        if warehouse not in WAREHOUSES:
            raise ToolError(f"unknown warehouse {warehouse!r}; warehouses are {', '.join(WAREHOUSES)}")
        return {"sku": sku.strip().upper(), "warehouse": warehouse, "units": item["stock"][warehouse]}
    stock = dict(item["stock"])
    return {"sku": sku.strip().upper(), "byWarehouse": stock, "total": sum(stock.values())}


@mcp.tool()
def quote_order(sku: str, quantity: int) -> dict[str, Any]:
    """Price of an order of ``quantity`` units, if the store has that many in stock."""
    item = _item(sku)
    if quantity < 1:
        raise ToolError("quantity must be at least 1")
    available = sum(item["stock"].values())
    if quantity > available:
        raise ToolError(f"only {available} units of {sku.strip().upper()} are in stock")
    total = item["priceCents"] * quantity
    return {"sku": sku.strip().upper(), "quantity": quantity, "totalCents": total,
            "total": f"{total // 100}.{total % 100:02d}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on this port")
    parser.add_argument("--host", default="127.0.0.1", help="interface for --http (default 127.0.0.1)")
    args = parser.parse_args()
    if args.http is None:
        mcp.run()
    else:
        mcp.run("streamable-http", host=args.host, port=args.http)


if __name__ == "__main__":
    main()
