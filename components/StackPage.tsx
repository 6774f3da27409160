'use client'
/**
 * The stack page: edit the template, preview and submit an update (also while
 * one runs: it supersedes it), cancel with or without rollback, delete, and
 * watch the traversal converge on the live graph and its table twin.
 */
import Link from 'next/link'
import { useRouter } from 'next/navigation'
import { useEffect, useMemo, useState } from 'react'
import { applyEvents, criticalPath, initialModel, type GraphModel } from '../lib/ui/graph-model'
import { api, ApiError, type ApiIssue } from './api'
import { EventsTimeline } from './EventsTimeline'
import { Legend } from './Legend'
import { LiveGraph } from './LiveGraph'
import { NodePanel } from './NodePanel'
import { ParametersForm, parameterValues } from './ParametersForm'
import { PreviewPanel, type PreviewResult } from './PreviewPanel'
import { EditGuardView } from './EditGuard'
import { useEditGuard } from './use-edit-guard'
import { ReplayBar } from './ReplayBar'
import { ResourcesTable } from './ResourcesTable'
import { ProgressBar, StatusBadge } from './StatusBadge'
import { TemplateEditor, ValidationLine } from './TemplateEditor'
import { TraversalHistory } from './TraversalHistory'
import { useStackLive } from './use-stack-live'
import { useValidation } from './use-validation'

type Tab = 'events' | 'traversals' | 'outputs'

function fmtSeconds(s: number) {
  return s < 60 ? `${Math.round(s)} s` : `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`
}

export function StackPage({ stackId }: { stackId: string }) {
  const router = useRouter()
  const live = useStackLive(stackId)
  const [source, setSource] = useState<string | null>(null)
  const [params, setParams] = useState<Record<string, string>>({})
  const [issues, setIssues] = useState<ApiIssue[]>([])
  const [message, setMessage] = useState<{ kind: 'ok' | 'error'; text: string } | null>(null)
  const [preview, setPreview] = useState<PreviewResult | null>(null)
  const [busy, setBusy] = useState(false)
  const [confirm, setConfirm] = useState<'cancel' | 'delete' | null>(null)
  const [selected, setSelected] = useState<string | null>(null)
  const [tab, setTab] = useState<Tab>('events')
  const [replayAt, setReplayAt] = useState<number | null>(null)
  const [now, setNow] = useState(() => Date.now())
  const validation = useValidation(source ?? '')
  // Loads the template the edit starts from, and keeps every update from overwriting another by accident.
  const guard = useEditGuard(stackId, live.stack, setSource, () => live.refresh())

  const running = live.stack?.status === 'IN_PROGRESS'
  useEffect(() => {
    if (!running) return
    const t = setInterval(() => setNow(Date.now()), 1000)
    return () => clearInterval(t)
  }, [running])

  // Replay: the same fold, stopped at the chosen event.
  const replayModel: GraphModel | null = useMemo(() => {
    if (replayAt === null || !live.graph || !live.model) return null
    const m = initialModel(live.model.traversalId, live.graph, live.resources)
    applyEvents(m, live.traversalEvents.filter((e) => e.seq <= replayAt), new Map(live.resources.map((r) => [r.id, r])))
    return m
  }, [replayAt, live.graph, live.model, live.traversalEvents, live.resources])
  const model = replayModel ?? live.model
  const estimate = useMemo(() => (model ? criticalPath(model, replayModel ? Date.parse(live.traversalEvents.find((e) => e.seq >= (replayAt ?? 0))?.at ?? '') || now : now) : null),
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [model, live.version, now, replayAt])
  const critical = useMemo(() => new Set(estimate?.path ?? []), [estimate])

  if (live.notFound) return <section><h1>Stack not found</h1><p>It does not exist, or it belongs to another project. <Link href="/">All stacks</Link></p></section>
  if (!live.stack) return <section><p>{live.error ? <span role="alert" className="error">{live.error}</span> : 'Loading…'}</p></section>
  const stack = live.stack

  const body = () => ({ template: source ?? '', parameters: parameterValues(params) })
  const run = async (what: string, fn: () => Promise<unknown>) => {
    setBusy(true)
    setMessage(null)
    try {
      await fn()
      setIssues([])
    } catch (err) {
      if (err instanceof ApiError) {
        setIssues(err.issues)
        setMessage({ kind: 'error', text: `${what} failed: ${err.message}` })
      } else setMessage({ kind: 'error', text: `${what} failed: ${(err as Error).message}` })
    } finally {
      setBusy(false)
    }
  }

  const submit = () =>
    run('Update', async () => {
      const wasRunning = running
      const r = await guard.update(body())
      if (!r) return // refused (the stack changed meanwhile) or unchanged: the guard shows it
      setPreview(null)
      setReplayAt(null)
      setMessage({ kind: 'ok', text: r.superseded && wasRunning ? `Update submitted; it superseded traversal ${r.superseded.slice(0, 8)}.` : 'Update submitted.' })
      live.refresh()
    })
  const doPreview = () =>
    run('Preview', async () => {
      setPreview(await api<PreviewResult>('POST', `/api/stacks/${stackId}/preview`, body()))
    })
  const cancel = (rollback: boolean) =>
    run('Cancel', async () => {
      await api('POST', `/api/stacks/${stackId}/cancel`, { rollback })
      setConfirm(null)
      setMessage({ kind: 'ok', text: rollback ? 'Cancelled; rolling back to the previous template.' : 'Cancelled without rollback; running actions finish, nothing new starts.' })
      live.refresh()
    })
  const remove = () =>
    run('Delete', async () => {
      await api('DELETE', `/api/stacks/${stackId}`)
      setConfirm(null)
      setMessage({ kind: 'ok', text: 'Deleting the stack.' })
      live.refresh()
    })

  const selectedNode = selected ? model?.nodes.get(selected) : undefined
  const row = selectedNode ? live.resources.find((r) => r.id === selectedNode.rowId) : undefined
  const deleted = stack.action === 'DELETE' && stack.status === 'COMPLETE'
  const allIssues = issues.length ? issues : validation.issues

  return (
    <section className="stack-page">
      <div className="toolbar">
        <h1 data-testid="stack-name">{stack.name}</h1>
        <StatusBadge action={stack.action} status={stack.status} />
        {running && estimate && <ProgressBar done={estimate.done} total={estimate.total} label="traversal progress" />}
        {running && estimate?.secondsLeft != null && <span className="note" data-testid="eta">about {fmtSeconds(estimate.secondsLeft)} left (critical path: {estimate.path.length} nodes)</span>}
        <span className="spacer" />
        <Link href="/">All stacks</Link>
      </div>
      {stack.statusReason && <p className="reason" data-testid="status-reason">{stack.statusReason}</p>}

      <div className="columns">
        <div className="col-left">
          <h2>Template</h2>
          {source === null ? <p>Loading template…</p> : <TemplateEditor value={source} onChange={setSource} issues={allIssues} label="template" />}
          <ValidationLine validation={validation} />
          <ParametersForm parameters={validation.parameters} values={params} onChange={setParams} />
          {running && <p className="note" data-testid="supersede-note">A traversal is running. Submitting now <strong>supersedes</strong> it: rows it still holds are handed over (retriggered) when their worker finishes, never replaced needlessly.</p>}
          <div className="actions">
            <button type="button" onClick={doPreview} disabled={busy || deleted}>Preview</button>
            <button type="button" className="primary" onClick={submit} disabled={busy || deleted}>{running ? 'Submit (supersede)' : 'Submit update'}</button>
            <button type="button" onClick={() => setConfirm('cancel')} disabled={busy || !running}>Cancel…</button>
            <button type="button" className="danger" onClick={() => setConfirm('delete')} disabled={busy || deleted}>Delete…</button>
          </div>
          {confirm === 'cancel' && (
            <div role="dialog" aria-label="cancel the running traversal" className="confirm">
              <p>Cancel the running {stack.action.toLowerCase()}?</p>
              <button type="button" onClick={() => cancel(true)}>Cancel and roll back</button>
              <button type="button" onClick={() => cancel(false)}>Cancel without rollback</button>
              <button type="button" className="link" onClick={() => setConfirm(null)}>Keep running</button>
            </div>
          )}
          {confirm === 'delete' && (
            <div role="dialog" aria-label="delete the stack" className="confirm">
              <p>Delete <strong>{stack.name}</strong> and every resource in it{running ? ' (the running traversal is aborted)' : ''}?</p>
              <button type="button" className="danger" onClick={remove}>Delete the stack</button>
              <button type="button" className="link" onClick={() => setConfirm(null)}>Keep it</button>
            </div>
          )}
          {message && <p role={message.kind === 'error' ? 'alert' : 'status'} className={message.kind} data-testid="message">{message.text}</p>}
          {source !== null && <EditGuardView guard={guard} source={source} onSource={setSource} busy={busy} />}
          {preview && <PreviewPanel preview={preview} />}
        </div>

        <div className="col-right">
          <h2>Traversal {model ? <small><code>{model.traversalId.slice(0, 8)}</code> {live.traversals.find((t) => t.current)?.action ?? ''}</small> : null}</h2>
          <ReplayBar events={live.traversalEvents} at={replayAt} onChange={setReplayAt} />
          <div className="graph-row">
            <LiveGraph model={model} version={live.version + (replayAt ?? 0)} rebuiltAt={live.rebuiltAt} critical={estimate?.path ?? []} selected={selected} onSelect={setSelected} />
            {selectedNode && <NodePanel node={selectedNode} row={row} onClose={() => setSelected(null)} />}
          </div>
          <Legend />
          {model && <ResourcesTable model={model} selected={selected} onSelect={setSelected} critical={critical} />}
        </div>
      </div>

      <div className="tabs" role="tablist">
        {(['events', 'traversals', 'outputs'] as Tab[]).map((t) => (
          <button key={t} role="tab" aria-selected={tab === t} onClick={() => setTab(t)}>{t[0]!.toUpperCase() + t.slice(1)}</button>
        ))}
      </div>
      {tab === 'events' && <EventsTimeline events={live.recent} />}
      {tab === 'traversals' && <TraversalHistory traversals={live.traversals} />}
      {tab === 'outputs' && (
        <dl className="outputs" data-testid="outputs">
          {Object.entries(stack.outputs).map(([k, o]) => (
            <div key={k}><dt>{k}</dt><dd>{o.error ? <span className="error">{o.error}</span> : <code>{JSON.stringify(o.value)}</code>}</dd></div>
          ))}
          {Object.keys(stack.outputs).length === 0 && <p>No outputs.</p>}
        </dl>
      )}
      {deleted && <p><button type="button" onClick={() => router.push('/')}>Back to the stacks</button></p>}
    </section>
  )
}
