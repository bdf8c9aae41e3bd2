/// The page at `/` until the live page proper is bundled: a list of the tasks from
/// `/api/status`, every name set as text (never as markup), refreshed every second.
enum LivePagePlaceholder {
    static func html(nonce: String) -> [UInt8] {
        Array("""
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>Overtime live page</title>
        <style nonce="\(nonce)">body{font:14px system-ui,sans-serif;margin:2em}td{padding:0 1em 0 0}</style></head>
        <body><h1>Overtime live page</h1><table><tbody id="tasks"></tbody></table>
        <script nonce="\(nonce)">
        "use strict";
        async function refresh() {
          const reply = await (await fetch("/api/status", {credentials: "same-origin"})).json();
          const rows = (reply.tasks || []).map(task => {
            const row = document.createElement("tr");
            for (const text of [task.name, task.state, task.reason || ""]) {
              const cell = document.createElement("td");
              cell.textContent = String(text);
              row.appendChild(cell);
            }
            return row;
          });
          document.getElementById("tasks").replaceChildren(...rows);
        }
        refresh();
        setInterval(refresh, 1000);
        </script></body></html>

        """.utf8)
    }
}
