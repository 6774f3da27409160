'use client'
/**
 * The stack page, and the page of one past traversal (`traversalId`): the
 * graph as the hero (a resizable split with the template editor, or full
 * width), the header's badge, progress and estimate, the actions (submit,
 * preview, check, check drift, rollback, cancel, delete), the supersede
 * banner, replay by time, and under the graph the resources table, events,
 * traversals, outputs. Drifted nodes are marked on the graph and the table
 * (lib/ui/drift.ts) while the drift check that found them is current.
 *
 * Deep links: `/stacks/<id>/traversals/<tid>?node=<name>&t=<seconds>` opens a
 * traversal at a moment with a node inspected; the address follows what the
 * user inspects and replays there.
 */
import dynamic from 'next/dynamic'
import Link from 'next/link'
import { useRouter } from 'next/navigation'
import { useCallback, useEffect, useMemo, useRef, useState } from 'react'
import { describeEvent, shortId } from '../lib/ui/event-text'
import { driftCounts } from '../lib/ui/drift'
import { criticalPath } from '../lib/ui/estimate'
import { progressOf, stateCounts, type DisplayNode, type GraphModel } from '../lib/ui/graph-model'
import { Replay } from '../lib/ui/replay'
import { selectNodes } from '../lib/ui/search'
import { GROUP_ABOVE, groupNodes, type GroupBy } from '../lib/ui/view-graph'
import { api, ApiError } from './api'
import { ConfirmDialog } from './ConfirmDialog'
import { EventsTimeline } from './EventsTimeline'
import { countsLine } from './graph-style'
import { GraphToolbar, type Filter } from './GraphToolbar'
import { GroupList } from './GroupList'
import { Legend } from './Legend'
import { LiveGraph, type GraphHandle } from './LiveGraph'
import { NodePanel } from './NodePanel'
import { Outputs } from './Outputs'
import { ReplayBar } from './ReplayBar'
import { ResourcesTable } from './ResourcesTable'
import { SplitPane } from './SplitPane'
import { ProgressBar, StatusBadge } from './StatusBadge'
import { SupersedeBanner } from './SupersedeBanner'
import { TraversalHistory } from './TraversalHistory'
import { TraversalTemplate } from './TraversalTemplate'
import { useTheme } from './theme'
import { useStackLive } from './use-stack-live'

// CodeMirror loads as its own chunk (the editor opens beside small stacks only). The graph (Cytoscape) is one of
// the page's own scripts: loaded as a chunk of its own, it arrived after the stack's data on a busy machine.
const TemplatePanel = dynamic(() => import('./TemplatePanel').then((m) => m.TemplatePanel), { ssr: false, loading: () => <p className="loading">Loading the editor…</p> })

type Tab = 'resources' | 'events' | 'traversals' | 'outputs' | 'template'

function fmtSeconds(s: number) {
  return s < 60 ? `${Math.round(s)} s` : `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`
}

/** Re-running the critical path costs O(nodes + edges): for big graphs at most this often. */
const ESTIMATE_EVERY_MS = 1000

/** What an ended drift check found, in one sentence (its marks are on the graph and the table). */
function driftEndMessage(m: GraphModel): { kind: 'ok' | 'error'; text: string } {
  const count = { IN_SYNC: 0, MODIFIED: 0, DELETED: 0, NOT_CHECKED: 0 }
  for (const n of m.nodes.values()) if (n.drift && n.drift.traversalId === m.traversalId) count[n.drift.state]++
  const outcome = m.end!.outcome
  if (outcome !== 'COMPLETE') return { kind: 'error', text: `Drift check ${outcome.toLowerCase()}${m.end!.reason ? `: ${m.end!.reason}` : ''}.` }
  const drifted = count.MODIFIED + count.DELETED
  const parts = [`${count.IN_SYNC} in sync`, ...(count.NOT_CHECKED ? [`${count.NOT_CHECKED} not checked`] : [])]
  return {
    kind: 'ok',
    text: drifted
      ? `Drift check done: ${drifted} drifted (${count.MODIFIED} modified, ${count.DELETED} gone), ${parts.join(', ')}. Update with converge to bring them back.`
      : `Drift check done: nothing drifted; ${parts.join(', ')}.`,
  }
}

export function StackPage({ stackId, traversalId = null, initialNode = null, initialT = null }: { stackId: string; traversalId?: string | null; initialNode?: string | null; initialT?: number | null }) {
  const router = useRouter()
  const graphRef = useRef<GraphHandle>(null)
  const live = useStackLive(stackId, traversalId, () => graphRef.current?.stepSpacingMs() ?? 0)
  const theme = useTheme()
  const messageRef = useRef<HTMLParagraphElement>(null)
  const opener = useRef<HTMLElement | null>(null)
  const [message, setMessage] = useState<{ kind: 'ok' | 'error'; text: string } | null>(null)
  const [busy, setBusy] = useState(false)
  const [confirm, setConfirm] = useState<'cancel' | 'delete' | null>(null)
  const [selected, setSelected] = useState<string | null>(null)
  const [tab, setTab] = useState<Tab>('resources')
  const [replayAt, setReplayAt] = useState<number | null>(initialT)
  const [playing, setPlaying] = useState(false)
  const [speed, setSpeed] = useState(5)
  const [query, setQuery] = useState('')
  const [filters, setFilters] = useState<ReadonlySet<Filter>>(new Set())
  const [groupBy, setGroupBy] = useState<GroupBy | null>(null)
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(new Set())
  const [editorOpen, setEditorOpen] = useState<boolean | null>(null)
  const [now, setNow] = useState(() => Date.now())
  /** the drift check this page started, until its end is announced */
  const [driftRun, setDriftRun] = useState<string | null>(null)

  const liveModel = live.model
  const total = liveModel?.nodes.size ?? 0
  const pinned = traversalId !== null
  // The editor beside the graph by default for small stacks on wide screens; the graph alone otherwise.
  const editorShown = !pinned && (editorOpen ?? (total <= 300 && typeof window !== 'undefined' && window.innerWidth >= 1100))
  const grouping: GroupBy = groupBy ?? (total > GROUP_ABOVE ? 'layer' : 'none')

  // Replay: the shown traversal as of a moment (seconds from its first event).
  const replaying0 = replayAt !== null
  // Made when a replay starts, from the events so far (the live list only grows in place).
  const replay = useMemo(
    () => (replaying0 && live.model && live.graph && live.events.length ? new Replay(live.model.traversalId, live.graph, live.types, [...live.events]) : null),
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [live.model, live.graph, replaying0],
  )
  const firstAt = live.events.length ? Date.parse(live.events[0]!.at) : 0
  const replaySpan = replay?.span ?? { start: firstAt, end: live.events.length ? Date.parse(live.events.at(-1)!.at) : 0 }
  const [replayVersion, setReplayVersion] = useState(0)
  const replayDirty = useRef(new Set<string>())
  useEffect(() => {
    if (replayAt === null || !replay) return
    const changed = replay.seek(replaySpan.start + replayAt * 1000)
    if (changed) for (const id of changed) replayDirty.current.add(id)
    else for (const id of replay.model.nodes.keys()) replayDirty.current.add(id)
    setReplayVersion((v) => v + 1)
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [replayAt, replay])
  const replaying = replayAt !== null && replay !== null
  const model: GraphModel | null = replaying ? replay.model : liveModel
  const version = replaying ? replayVersion : live.version
  const dirty = replaying ? replayDirty.current : live.dirty
  const ended = Boolean(model?.end)
  const running = !pinned && live.status?.status === 'IN_PROGRESS'
  const traversalRunning = model !== null && !ended && (live.traversal?.outcome ?? null) === null

  useEffect(() => {
    if (!traversalRunning) return
    // Timer reason: the estimate counts down between events.
    const t = setInterval(() => setNow(Date.now()), 1000)
    return () => clearInterval(t)
  }, [traversalRunning])

  // The estimate of a big graph is computed after the frame that shows it, at most once a second;
  // a small graph's with every change.
  const [estimate, setEstimate] = useState<ReturnType<typeof criticalPath> | null>(null)
  const lastEstimate = useRef<{ at: number; model: GraphModel | null }>({ at: 0, model: null })
  useEffect(() => {
    if (!model) return setEstimate(null)
    const t = replaying ? replaySpan.start + (replayAt ?? 0) * 1000 : now
    const prev = lastEstimate.current
    const big = total > 300
    const wait = big && prev.model === model && !replaying ? Math.max(0, ESTIMATE_EVERY_MS - (performance.now() - prev.at)) : 0
    // Timer reason: a big graph's critical path is recomputed at most once a second, off the frame that draws.
    const timer = setTimeout(() => {
      lastEstimate.current = { at: performance.now(), model }
      setEstimate(criticalPath(model, t))
    }, big ? wait : 0)
    return () => clearTimeout(timer)
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [model, version, now, replayAt])
  const critical = useMemo(() => new Set(estimate?.path ?? []), [estimate])
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const progress = useMemo(() => (model ? progressOf(model) : null), [model, version])
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const counts = useMemo(() => (model ? stateCounts(model) : {}), [model, version])
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const highlight = useMemo(() => (model ? selectNodes(model, query, filters) : null), [model, query, filters, filters.size > 0 || query ? version : 0])
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const groups = useMemo(() => (model && grouping !== 'none' ? [...groupNodes(model, grouping).values()] : []), [model, grouping, model?.nodes.size])
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const drifted = useMemo(() => (model ? driftCounts(model) : { modified: 0, deleted: 0 }), [model, version])
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const blocked = useMemo(() => (model ? [...model.nodes.values()].filter((n) => n.state === 'blocked') : []), [model, version])

  // Deep link: the node by name, once the model is there.
  const linked = useRef(false)
  useEffect(() => {
    if (linked.current || !liveModel || !initialNode) return
    linked.current = true
    const n = [...liveModel.nodes.values()].find((x) => x.name === initialNode || x.id === initialNode)
    if (n) setSelected(n.id)
  }, [liveModel, initialNode])
  // ... and the address follows what is inspected and the replay position (history view).
  useEffect(() => {
    if (!pinned || !model) return
    const q = new URLSearchParams()
    const n = selected ? model.nodes.get(selected) : null
    if (n) q.set('node', n.name)
    if (replayAt !== null) q.set('t', replayAt.toFixed(1))
    const url = `${location.pathname}${q.size ? `?${q}` : ''}`
    if (url !== `${location.pathname}${location.search}`) history.replaceState(history.state, '', url)
  }, [pinned, model, selected, replayAt])

  const describe = useCallback((n: DisplayNode) => (n.last ? describeEvent(n.last, live.workers) : ''), [live.workers])
  const describeId = useCallback((id: string) => {
    const n = model?.nodes.get(id)
    return n ? `${n.name}: ${describe(n) || n.state}` : id
  }, [model, describe])

  const inspect = useCallback((id: string | null, from?: HTMLElement | null) => {
    if (id && from !== undefined) opener.current = from
    else if (id && !selected) opener.current = document.activeElement as HTMLElement | null
    setSelected(id)
  }, [selected])
  const closePanel = useCallback(() => {
    setSelected(null)
    const back = opener.current
    opener.current = null
    // Focus returns where it came from (the row's button, the graph).
    if (back?.isConnected) back.focus()
    else document.querySelector<HTMLElement>('[data-testid="graph"]')?.focus()
  }, [])

  const toggleGroup = useCallback((id: string) => setExpanded((s) => {
    const n = new Set(s)
    if (n.has(id)) n.delete(id)
    else n.add(id)
    return n
  }), [])

  // After an action, focus lands on its result (once a dialog that asked for it has closed).
  const focusResult = useRef(false)
  const run = useCallback(async (what: string, fn: () => Promise<string>) => {
    setBusy(true)
    setMessage(null)
    let err: ApiError | Error | null = null
    try {
      const text = await fn()
      setMessage({ kind: 'ok', text })
    } catch (e) {
      err = e as Error
      setMessage({ kind: 'error', text: `${what} failed: ${err.message}` })
    } finally {
      focusResult.current = true
      setBusy(false)
    }
    return err
  }, [])
  // The drift check this page started ended: say what it found (the message is a live region).
  useEffect(() => {
    if (!driftRun || !liveModel || liveModel.traversalId !== driftRun || !liveModel.end) return
    setDriftRun(null)
    setMessage(driftEndMessage(liveModel))
  }, [driftRun, liveModel, live.version])
  useEffect(() => {
    if (!focusResult.current || confirm !== null || busy) return
    focusResult.current = false
    messageRef.current?.focus()
  }, [message, confirm, busy])

  if (live.phase === 'not-found') return <section><h1>Stack not found</h1><p>It does not exist, or it belongs to another project. <Link href="/">All stacks</Link></p></section>
  if (live.phase === 'error' && !live.stack) return <section><p role="alert" className="error">{live.error}</p></section>
  if (!live.stack || !live.status) return <section aria-busy="true"><p className="loading">Loading the stack…</p></section>
  const stack = live.stack
  const status = live.status
  const deleted = status.action === 'DELETE' && status.status === 'COMPLETE'
  const shownTraversal = live.traversal
  const selectedNode = selected ? model?.nodes.get(selected) : undefined

  const post = (path: string, what: string, done: string, body?: unknown) => run(what, async () => {
    await api('POST', `/api/stacks/${stackId}/${path}`, body ?? {})
    setConfirm(null)
    setReplayAt(null)
    return done
  })
  const checkDrift = () => run('Drift check', async () => {
    const r = await api<{ traversalId: string | null }>('POST', `/api/stacks/${stackId}/drift`, {})
    setReplayAt(null)
    setDriftRun(r.traversalId)
    return 'Checking drift: every resource is being compared with what Kiln stored. The rows are not changed.'
  })
  const cancel = (rollback: boolean) => post('cancel', 'Cancel', rollback ? 'Cancelled; rolling back to the previous template.' : 'Cancelled without rollback: running actions finish, nothing new starts. The graph shows which rows changed and which did not.', { rollback })
  const remove = () => run('Delete', async () => {
    await api('DELETE', `/api/stacks/${stackId}`)
    setConfirm(null)
    return 'Deleting the stack.'
  })
  const onZoom = (how: 'in' | 'out' | 'fit' | 'actual') => {
    const g = graphRef.current
    if (how === 'in') g?.zoomBy(1.25)
    else if (how === 'out') g?.zoomBy(0.8)
    else if (how === 'fit') g?.fit()
    else g?.actualSize()
  }
  const duration = Math.max(0, (replaySpan.end - replaySpan.start) / 1000)
  const pastTraversal = pinned && shownTraversal !== null && !shownTraversal.current

  const header = (
    <div className="stack-head">
      <h1 data-testid="stack-name">{stack.name}</h1>
      {pastTraversal && model ? (
        <StatusBadge action={shownTraversal.action} status={model.end?.outcome ?? shownTraversal.outcome ?? 'IN_PROGRESS'} />
      ) : (
        <StatusBadge action={status.action} status={status.status} cancelled={status.cancelled} />
      )}
      {model && progress && (traversalRunning || replaying) && <ProgressBar done={progress.done} total={progress.total} label="traversal progress" />}
      {model && traversalRunning && estimate && (
        <span className="note" data-testid="eta">
          {estimate.secondsLeft !== null ? `about ${fmtSeconds(estimate.secondsLeft)} left (critical path: ${estimate.path.length} nodes)` : estimate.pending === 'finishing' ? 'finishing…' : 'estimating…'}
        </span>
      )}
      {live.behindMs > 0 && !replaying && <span className="behind" role="status" data-testid="behind">behind by {Math.round(live.behindMs / 1000)} s</span>}
      {replaying && <span className="replaying" role="status">replay</span>}
      <span className="spacer" />
      {!pinned && (
        <div className="head-actions">
          <button type="button" aria-expanded={editorShown} aria-controls="template-pane" onClick={() => setEditorOpen(!editorShown)}>{editorShown ? 'Hide template' : 'Edit template'}</button>
          <button type="button" onClick={() => post('check', 'Check', 'Check started: every resource is checked against its provider.')} disabled={busy || running || deleted} title={running ? 'wait for the running traversal to finish' : 'check every resource'}>Check</button>
          <button type="button" onClick={checkDrift} disabled={busy || running || deleted} title={running ? 'wait for the running traversal to finish' : 'compare every resource with what Kiln stored (changes nothing)'}>Check drift</button>
          <button type="button" onClick={() => post('rollback', 'Rollback', 'Rolling back to the last template that completed.')} disabled={busy || deleted || status.action === 'DELETE'} title="roll back to the last template that completed">Rollback</button>
          <button type="button" onClick={() => setConfirm('cancel')} disabled={busy || !running || status.action === 'DELETE'}>Cancel…</button>
          <button type="button" className="danger" onClick={() => setConfirm('delete')} disabled={busy || deleted}>Delete…</button>
        </div>
      )}
      {pinned && <Link className="button" href={`/stacks/${stackId}`}>Open the live view</Link>}
    </div>
  )

  const graphPane = (
    <div className="graph-pane">
      <div className="graph-caption">
        <h2>
          Traversal {shownTraversal ? <><code>{shortId(shownTraversal.id)}</code> {shownTraversal.action.toLowerCase()}</> : null}
          {model?.end ? <small className="note"> · {model.end.outcome.toLowerCase()}{model.end.outcome === 'CANCELLED' ? ' (rows that ran kept their changes)' : ''}</small> : null}
        </h2>
        {live.events.length > 0 && (
          <ReplayBar duration={duration} at={replayAt} playing={playing} speed={speed} onSeek={setReplayAt} onPlay={setPlaying} onSpeed={setSpeed} finished={Boolean(liveModel?.end) || pastTraversal} />
        )}
      </div>
      {model && (
        <GraphToolbar
          query={query} onQuery={setQuery} filters={filters}
          onToggleFilter={(f) => setFilters((s) => { const n = new Set(s); if (n.has(f)) n.delete(f); else n.add(f); return n })}
          groupBy={grouping} onGroupBy={(g) => { setGroupBy(g); setExpanded(new Set()) }}
          matches={highlight ? highlight.size : null} counts={countsLine(counts)} onZoom={onZoom}
          onFocusMatches={() => highlight && graphRef.current?.fit([...highlight])}
          focusable={{ blocked: counts.blocked ?? 0, failed: counts.failed ?? 0 }}
          onFocusState={(s) => model && graphRef.current?.fit([...model.nodes.values()].filter((n) => n.state === s).map((n) => n.id))}
          drifted={drifted}
        />
      )}
      {model && groups.length > 0 && <GroupList model={model} groups={groups} expanded={expanded} onToggle={toggleGroup} />}
      {!model && <p className="empty">{live.traversals.length ? 'No traversal to show.' : 'This stack has not run a traversal yet.'}</p>}
      <LiveGraph
        handle={graphRef} model={model} version={version} dirty={dirty} groupBy={grouping} expanded={expanded}
        onToggleGroup={toggleGroup}
        highlight={highlight} critical={traversalRunning ? (estimate?.path ?? []) : []} selected={selected}
        onSelect={(id) => inspect(id, null)} theme={theme} describe={describeId}
      />
      <Legend />
    </div>
  )

  return (
    <section className="stack-page">
      {header}
      {status.reason && !pinned && <p className="reason" data-testid="status-reason">{status.reason}</p>}
      {pinned && shownTraversal && (
        <p className="banner" data-testid="history-banner">
          Traversal <code>{shortId(shownTraversal.id)}</code>: {shownTraversal.action.toLowerCase()} started by {shownTraversal.startedBy} at {new Date(shownTraversal.startedAt).toLocaleString()}
          {shownTraversal.supersededBy ? (
            <>, superseded by <Link href={`/stacks/${stackId}/traversals/${shownTraversal.supersededBy}`}>traversal <code>{shortId(shownTraversal.supersededBy)}</code></Link></>
          ) : shownTraversal.outcome ? `, ${shownTraversal.outcome.toLowerCase()}${shownTraversal.outcomeReason ? ` (${shownTraversal.outcomeReason})` : ''}` : ', still running'}.
        </p>
      )}
      <p ref={messageRef} tabIndex={-1} role={message?.kind === 'error' ? 'alert' : 'status'} className={`message ${message?.kind ?? ''}`} data-testid="message">{message?.text ?? ''}</p>
      {!replaying && <SupersedeBanner stackId={stackId} blocked={blocked} traversals={live.traversals} onInspect={(id, from) => inspect(id, from)} />}

      {editorShown ? (
        <SplitPane label="resize the template editor" first={<div id="template-pane"><TemplatePanel stackId={stackId} stack={live.stack} running={running} disabled={deleted} busy={busy} run={run} onStarted={() => live.refresh()} /></div>} second={graphPane} />
      ) : (
        graphPane
      )}

      <div className="tabs" role="tablist" aria-label="stack details">
        {(['resources', 'events', 'traversals', 'outputs', ...(pinned ? (['template'] as Tab[]) : [])] as Tab[]).map((t) => (
          <button key={t} id={`tab-${t}`} role="tab" type="button" aria-selected={tab === t} aria-controls={`panel-${t}`} onClick={() => setTab(t)}>{t[0]!.toUpperCase() + t.slice(1)}</button>
        ))}
      </div>
      <div role="tabpanel" id={`panel-${tab}`} aria-labelledby={`tab-${tab}`} className="tab-panel">
        {tab === 'resources' && model && (
          <ResourcesTable model={model} version={version} only={highlight} selected={selected} onSelect={(id, from) => inspect(id, from)} critical={critical} workers={live.workers} describe={describe} />
        )}
        {tab === 'events' && <EventsTimeline events={replaying ? live.events.slice(0, replay.position) : live.events} workers={live.workers} />}
        {tab === 'traversals' && <TraversalHistory stackId={stackId} traversals={live.traversals} shown={shownTraversal?.id ?? null} />}
        {tab === 'outputs' && <Outputs stackId={stackId} version={live.stack.lastSeq} />}
        {tab === 'template' && shownTraversal && <TraversalTemplate stackId={stackId} traversalId={shownTraversal.id} />}
      </div>
      {deleted && <p><button type="button" onClick={() => router.push('/')}>Back to the stacks</button></p>}

      {selectedNode && <NodePanel stackId={stackId} node={selectedNode} version={version} workers={live.workers} onClose={closePanel} />}
      <ConfirmDialog open={confirm === 'cancel'} label="cancel the running traversal" onClose={() => setConfirm(null)}>
        <h2>Cancel the running {status.action.toLowerCase()}?</h2>
        <p>Rolling back returns every row to the last template that completed. Without rollback, running actions finish, nothing new starts, and rows keep what they have.</p>
        <div className="actions">
          <button type="button" onClick={() => cancel(true)} disabled={busy}>Cancel and roll back</button>
          <button type="button" onClick={() => cancel(false)} disabled={busy}>Cancel without rollback</button>
          <button type="button" className="link" onClick={() => setConfirm(null)} data-autofocus>Keep running</button>
        </div>
      </ConfirmDialog>
      <ConfirmDialog open={confirm === 'delete'} label="delete the stack" onClose={() => setConfirm(null)}>
        <h2>Delete {stack.name}?</h2>
        <p>Every resource in it is deleted{running ? ', and the running traversal is aborted' : ''}.</p>
        <div className="actions">
          <button type="button" className="danger" onClick={remove} disabled={busy}>Delete the stack</button>
          <button type="button" className="link" onClick={() => setConfirm(null)} data-autofocus>Keep it</button>
        </div>
      </ConfirmDialog>
    </section>
  )
}
