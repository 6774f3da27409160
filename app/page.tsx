export default function Home() {
  return (
    <main style={{ fontFamily: 'system-ui, sans-serif', padding: 32 }}>
      <h1>Kiln</h1>
      <p>Stack convergence engine. The API is at <code>/api</code>; health at <a href="/api/health">/api/health</a>.</p>
    </main>
  )
}
